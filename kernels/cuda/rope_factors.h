// RoPE angles as a per-pair factor of the position, computed once on the host in double.
//
// Every angle of spec 5.2/5.3 is linear in the position p: θ_i = p · s_i, where s_i folds
// base^(−2i/n_rot), the frequency factor, and linear or YaRN scaling (the YaRN ramp depends on
// i only). The CUDA RoPE kernel multiplies p by s_i in double, so the GPU's angles match
// cpu::RopeAngles' double computation and no table per position is needed.
#pragma once

#include <vector>

#include "kernels/cpu/nn_ops.h"

namespace tessera::cuda {

// s_i for i = 0 .. n_rot/2 − 1. Empty when n_rot is not a positive even number.
std::vector<double> RopeThetaScales(const cpu::RopeParams& p);

}  // namespace tessera::cuda
