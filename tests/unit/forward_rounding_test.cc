// The rounding points of the 16-bit compute dtypes are the precisions the forward pass
// (worker/executor/forward.h) gives its tensors: after every operation, a kAct tensor holds
// values of the compute dtype and a kF32 tensor float32 ones. The GPU gets this from its
// storage (kAct tensors are 16-bit buffers); the CPU stores floats and must round after
// each operation. This test runs the shared pass over the CPU's operations with a check
// after each one, so a CPU operation that skips a rounding the GPU's storage makes (or
// rounds a float32 tensor the GPU keeps wide) fails here, naming the operation.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/model/synthetic.h"
#include "common/util/half.h"
#include "gtest/gtest.h"
#include "worker/executor/cpu_ops.h"
#include "worker/executor/executor.h"
#include "worker/executor/executor_impl.h"
#include "worker/executor/forward.h"

namespace tessera::executor {

struct ExecutorPeer {
  static Executor::Impl& impl(Executor& e) { return *e.impl_; }
};

namespace {

// CpuOps with a check of every output: each operation below calls the CPU's and then
// looks at the values it left.
class CheckedOps : public CpuOps {
 public:
  CheckedOps(Executor::Impl& impl, Batch& b, ComputeDtype dtype) : CpuOps(impl, b), dtype_(dtype) {}

  std::vector<std::string> problems;
  int checked_act = 0, checked_f32 = 0;

  absl::Status Embed(Act x) { return Then("Embed", CpuOps::Embed(x), {x}); }
  absl::Status Products(std::initializer_list<Product> ps) {
    std::vector<Act> ys;
    for (const Product& p : ps) ys.push_back(p.y);
    return Then("Products", CpuOps::Products(ps), ys);
  }
  absl::Status HeadProducts(const Mat& stack, int64_t heads, Act x, Act y) {
    return Then("HeadProducts", CpuOps::HeadProducts(stack, heads, x, y), {y});
  }
  absl::Status ExpertProducts(std::initializer_list<Expert> ps, Act x, bool per_choice) {
    std::vector<Act> ys;
    for (const Expert& p : ps) ys.push_back(p.y);
    return Then("ExpertProducts", CpuOps::ExpertProducts(ps, x, per_choice), ys);
  }
  absl::Status Combine(Act down, Act y) { return Then("Combine", CpuOps::Combine(down, y), {y}); }
  absl::Status RmsNorm(Act in, const Vec& w, float eps, Act out) {
    return Then("RmsNorm", CpuOps::RmsNorm(in, w, eps, out), {out});
  }
  absl::Status LayerNorm(Act x, const Vec& w, const Vec& b, float eps) {
    return Then("LayerNorm", CpuOps::LayerNorm(x, w, b, eps), {x});
  }
  absl::Status Rope(Act v, int64_t heads, int64_t stride) {
    return Then("Rope", CpuOps::Rope(v, heads, stride), {v});
  }
  absl::Status AddBias(Act y, const Vec& b) { return Then("AddBias", CpuOps::AddBias(y, b), {y}); }
  absl::Status Add(Act x, Act y) { return Then("Add", CpuOps::Add(x, y), {x}); }
  absl::Status SiluMul(Act g, Act u) { return Then("SiluMul", CpuOps::SiluMul(g, u), {g}); }
  absl::Status Scale(Act x, float s) { return Then("Scale", CpuOps::Scale(x, s), {x}); }
  absl::Status Copy(Act src, Act dst) { return Then("Copy", CpuOps::Copy(src, dst), {dst}); }
  absl::Status RoundToAct(Act x) {
    // Float32 storage of compute-dtype values: checked as kAct.
    Act as_act = x;
    as_act.prec = Prec::kAct;
    return Then("RoundToAct", CpuOps::RoundToAct(x), {as_act});
  }
  absl::Status Attend(int layer, const AttentionShape& s, Act q, Act out) {
    return Then("Attend", CpuOps::Attend(layer, s, q, out), {out});
  }
  absl::Status GatherHeadRows(Act x, Act hr) {
    return Then("GatherHeadRows", CpuOps::GatherHeadRows(x, hr), {hr});
  }
  absl::Status AllReduce(Act x) { return Then("AllReduce", CpuOps::AllReduce(x), {x}); }

 private:
  bool Representable(float v) const {
    if (dtype_ == ComputeDtype::kBFloat16) return Bf16ToFloat(FloatToBf16(v)) == v;
    return Fp16ToFloat(FloatToFp16(v)) == v;
  }
  absl::Status Then(const char* op, absl::Status s, std::vector<Act> outs) {
    if (!s.ok()) return s;
    for (const Act& a : outs) {
      int64_t wide = 0;
      for (int64_t i = 0; i < a.rows; ++i) {
        const float* row = static_cast<const float*>(a.data) + i * a.ld;
        for (int64_t j = 0; j < a.cols; ++j) wide += Representable(row[j]) ? 0 : 1;
      }
      if (a.prec == Prec::kAct) {
        ++checked_act;
        if (wide > 0) {
          problems.push_back(absl::StrCat(op, ": ", wide, " of ", a.rows * a.cols,
                                          " values of a compute-dtype tensor are not rounded"));
        }
      } else if (a.rows * a.cols >= 64) {
        // Arithmetic on random weights gives float32 values that 16 bits cannot hold; a
        // tensor with none of them was rounded where the GPU keeps float32.
        ++checked_f32;
        if (wide == 0) {
          problems.push_back(absl::StrCat(op, ": a float32 tensor of ", a.rows * a.cols,
                                          " values holds only compute-dtype values"));
        }
      }
    }
    return absl::OkStatus();
  }
  ComputeDtype dtype_;
};

TEST(ForwardRounding, EveryOperationLeavesItsOutputInItsPrecision) {
  for (const char* arch :
       {"llama", "qwen2", "qwen3", "qwen3moe", "glm4moe", "deepseek2", "glm-dsa"}) {
    for (ComputeDtype dtype : {ComputeDtype::kBFloat16, ComputeDtype::kFloat16}) {
      SCOPED_TRACE(absl::StrCat(arch, dtype == ComputeDtype::kBFloat16 ? " bf16" : " f16"));
      model::SyntheticOptions so;
      so.arch = arch;
      so.quant = "Q8_0";
      so.seed = 5;
      auto w = model::BuildSyntheticModel(so);
      ASSERT_TRUE(w.ok()) << w.status();
      const std::string path = absl::StrCat(::testing::TempDir(), "/rounding-", arch, ".gguf");
      ASSERT_TRUE(w->WriteFile(path).ok());
      ExecutorOptions o;
      o.dtype = dtype;
      o.kv_tokens = 128;
      o.threads = 2;
      auto ex = Executor::Create(path, o);
      ASSERT_TRUE(ex.ok()) << ex.status();
      Executor::Impl& impl = ExecutorPeer::impl(**ex);
      // A prefill of two sequences, then a decode step of both (the in-place attention).
      std::vector<int32_t> t1 = {1, 7, 19, 4, 33, 12, 9, 50, 2}, t2 = {3, 14, 15, 92, 65};
      std::vector<SequenceInput> prefill(2), decode(2);
      prefill[0].tokens = t1;
      prefill[0].block_table = {0, 1, 2, 3};
      prefill[1].tokens = t2;
      prefill[1].block_table = {4, 5, 6, 7};
      prefill[1].all_logits = true;
      decode[0] = {.tokens = {21}, .start_pos = 9, .block_table = {0, 1, 2, 3}};
      decode[1] = {.tokens = {8}, .start_pos = 5, .block_table = {4, 5, 6, 7}};
      for (const auto* step : {&prefill, &decode}) {
        Batch b;
        ASSERT_TRUE(impl.Flatten(*step, nullptr, b).ok());
        CheckedOps ops(impl, b, dtype);
        ASSERT_TRUE(ForwardPass<CheckedOps>(ops).Run(b.size()).ok());
        EXPECT_TRUE(ops.problems.empty()) << ops.problems.front();
        EXPECT_GT(ops.checked_act, 10);
        EXPECT_GT(ops.checked_f32, 3);
      }
    }
  }
}

}  // namespace
}  // namespace tessera::executor
