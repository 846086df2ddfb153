// Numbers the forward pass, the cache and the daemon agree on, named once. Header-only and
// free of other includes, so that CUDA sources and the emulator use the same values.
#pragma once

namespace tessera::model {

// The floor under the sum of the chosen experts' weights when they are renormalised
// (spec 5.6, step 7): 2^-14, the smallest normal half-precision number.
inline constexpr double kExpertWeightSumFloor = 6.103515625e-5;

// Token slots per KV-cache block when neither the operator nor the worker's setup names
// another size (vLLM's default too).
inline constexpr int kDefaultKvBlockSize = 16;

}  // namespace tessera::model
