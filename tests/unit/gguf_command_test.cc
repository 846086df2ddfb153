// tessera gguf split|merge against files written by GgufWriter: the original file is the
// truth every part and every merge is compared with.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "common/gguf/split.h"
#include "common/gguf/writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/commands.h"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;
using gguf::GgmlType;
using gguf::GgufFile;
using gguf::GgufModel;
using gguf::GgufWriter;
using gguf::Value;
using gguf::ValueType;
using ::testing::HasSubstr;

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class GgufCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera_gguf_cmd_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string P(const std::string& name) { return (dir_ / name).string(); }

  // A model whose tensors have sizes (padded to 32) 1024, 1024, 3072, 512, 512 and 144:
  // F32 rows of 250 floats pad 1000 -> 1024 bytes, a Q4_K tensor, odd sizes.
  std::string WriteModel(const std::string& name) {
    GgufWriter w;
    auto& md = w.metadata();
    md.Set("general.architecture", Value::String("llama"));
    md.Set("general.name", Value::String("split test"));
    md.Set("llama.block_count", Value::U32(2));
    md.Set("llama.rope.freq_base", Value::F32(10000.f));
    md.Set("llama.use_parallel_residual", Value::Bool(true));
    md.Set("tokenizer.ggml.tokens", Value::StringArray({"a", "b", "c"}));
    md.Set("tokenizer.ggml.scores", Value::F32Array({0.5f, -1.f, 2.f}));
    md.Set("general.big", Value::I64(-1234567890123));
    sizes_ = {1000, 1000, 3000, 500, 500, 144};
    const char* names[] = {"token_embd.weight",   "blk.0.attn_q.weight",   "blk.0.ffn_up.weight",
                           "blk.1.attn_q.weight", "blk.1.ffn_down.weight", "output_norm.weight"};
    for (size_t i = 0; i < sizes_.size(); ++i) {
      std::vector<uint8_t> data = RandomBytes(sizes_[i], static_cast<uint32_t>(i + 1));
      if (i == 2) {
        // 3000 bytes is not a Q4_K multiple (144 per 256 values); use F32 750.
        EXPECT_TRUE(w.AddTensor(names[i], {750}, GgmlType::kF32, data).ok());
      } else if (i == 5) {
        EXPECT_TRUE(w.AddTensor(names[i], {256}, GgmlType::kQ4_K, data).ok());  // 144 bytes
      } else {
        EXPECT_TRUE(
            w.AddTensor(names[i], {static_cast<int64_t>(sizes_[i] / 4)}, GgmlType::kF32, data)
                .ok());
      }
    }
    std::string path = P(name);
    EXPECT_TRUE(w.WriteFile(path).ok());
    return path;
  }

  int Run(const Args& args, std::string* err = nullptr) {
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    int rc = RunGguf(args);
    ::testing::internal::GetCapturedStdout();
    std::string e = ::testing::internal::GetCapturedStderr();
    if (err) *err = e;
    return rc;
  }

  // Metadata and tensors of `got` equal those of `want`, ignoring split.* keys.
  void ExpectSameModel(const GgufModel& want, const GgufModel& got) {
    std::vector<std::pair<std::string, Value>> a, b;
    for (const auto& kv : want.metadata().entries()) {
      if (kv.first.rfind("split.", 0) != 0) a.push_back(kv);
    }
    for (const auto& kv : got.metadata().entries()) {
      if (kv.first.rfind("split.", 0) != 0) b.push_back(kv);
    }
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].first, b[i].first);
      EXPECT_EQ(a[i].second.type(), b[i].second.type()) << a[i].first;
      EXPECT_EQ(a[i].second, b[i].second) << a[i].first;
    }
    ASSERT_EQ(want.tensors().size(), got.tensors().size());
    for (size_t i = 0; i < want.tensors().size(); ++i) {
      const auto& t = want.tensors()[i];
      const auto* u = got.FindTensor(t.name);
      ASSERT_NE(u, nullptr) << t.name;
      EXPECT_EQ(got.tensors()[i].name, t.name) << "tensor order";
      EXPECT_EQ(u->dims, t.dims);
      EXPECT_EQ(u->type, t.type);
      auto x = want.TensorData(t);
      auto y = got.TensorData(*u);
      ASSERT_EQ(x.size(), y.size());
      EXPECT_TRUE(std::equal(x.begin(), x.end(), y.begin())) << t.name;
    }
  }

  fs::path dir_;
  std::vector<size_t> sizes_;
};

TEST_F(GgufCommandTest, SplitByTensorCountThenMergeGivesTheOriginalBack) {
  std::string in = WriteModel("m.gguf");
  ASSERT_EQ(Run({"split", "--max-tensors", "4", in, P("s")}), 0);
  // 6 tensors, 4 per part: 2 parts named like llama-gguf-split's.
  ASSERT_TRUE(fs::exists(P("s-00001-of-00002.gguf")));
  ASSERT_TRUE(fs::exists(P("s-00002-of-00002.gguf")));
  EXPECT_FALSE(fs::exists(P("s-00001-of-00002.gguf.partial")));

  auto first = GgufFile::Open(P("s-00001-of-00002.gguf"));
  auto second = GgufFile::Open(P("s-00002-of-00002.gguf"));
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ((*first)->tensors().size(), 4u);
  EXPECT_EQ((*second)->tensors().size(), 2u);
  // Keys and their exact types as llama.cpp writes and checks them.
  for (const auto* f : {first->get(), second->get()}) {
    const auto* no = f->metadata().Find("split.no");
    const auto* count = f->metadata().Find("split.count");
    const auto* total = f->metadata().Find("split.tensors.count");
    ASSERT_TRUE(no && count && total);
    EXPECT_EQ(no->type(), ValueType::kUint16);
    EXPECT_EQ(count->type(), ValueType::kUint16);
    EXPECT_EQ(total->type(), ValueType::kInt32);
    EXPECT_EQ(*count->AsUint(), 2u);
    EXPECT_EQ(*total->AsInt(), 6);
  }
  EXPECT_EQ(*(*first)->metadata().Find("split.no")->AsUint(), 0u);
  EXPECT_EQ(*(*second)->metadata().Find("split.no")->AsUint(), 1u);
  // All model metadata in the first part only.
  EXPECT_EQ((*first)->metadata().size(), 8u + 3u);
  EXPECT_EQ((*second)->metadata().size(), 3u);

  auto original = GgufModel::Open(in);
  auto split = GgufModel::Open(P("s-00002-of-00002.gguf"));  // any part opens the set
  ASSERT_TRUE(original.ok() && split.ok()) << split.status();
  EXPECT_EQ(split->part_count(), 2u);
  ExpectSameModel(*original, *split);

  ASSERT_EQ(Run({"merge", P("s-00001-of-00002.gguf"), P("merged.gguf")}), 0);
  auto merged = GgufModel::Open(P("merged.gguf"));
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_FALSE(merged->metadata().Has("split.count"));
  ExpectSameModel(*original, *merged);
  // Same writer, same metadata order, no split keys: the very same bytes.
  EXPECT_TRUE(ReadAll(in) == ReadAll(P("merged.gguf")));
}

TEST_F(GgufCommandTest, SplitBySizeKeepsEachPartWithinTheBound) {
  std::string in = WriteModel("m.gguf");
  // Padded sizes 1024, 1024, 3008, 512, 512, 160 with a 2048-byte bound: [0 1] [2] [3 4 5].
  ASSERT_EQ(Run({"split", "--max-size", "2KiB", in, P("z")}), 0);
  std::vector<size_t> want_counts = {2, 1, 3};
  for (uint32_t p = 0; p < 3; ++p) {
    auto f = GgufFile::Open(gguf::SplitName::Format(P("z"), p + 1, 3));
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ((*f)->tensors().size(), want_counts[p]) << "part " << p + 1;
    uint64_t data = (*f)->file_size() - (*f)->data_offset();
    EXPECT_TRUE(data <= 2048 || (*f)->tensors().size() == 1) << "part " << p + 1 << ": " << data;
  }
  auto original = GgufModel::Open(in);
  auto split = GgufModel::Open(P("z-00001-of-00003.gguf"));
  ASSERT_TRUE(split.ok()) << split.status();
  ExpectSameModel(*original, *split);
}

TEST_F(GgufCommandTest, NoTensorFirstSplitAndResplittingASplitSet) {
  std::string in = WriteModel("m.gguf");
  ASSERT_EQ(Run({"split", "--max-tensors", "3", "--no-tensor-first-split", in, P("n")}), 0);
  auto first = GgufFile::Open(P("n-00001-of-00003.gguf"));
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE((*first)->tensors().empty());
  EXPECT_TRUE((*first)->metadata().Has("general.architecture"));
  auto set = GgufModel::Open(P("n-00003-of-00003.gguf"));
  ASSERT_TRUE(set.ok()) << set.status();
  auto original = GgufModel::Open(in);
  ExpectSameModel(*original, *set);
  // A split set is a valid input to split again.
  ASSERT_EQ(Run({"split", "--max-tensors", "6", P("n-00002-of-00003.gguf"), P("one")}), 0);
  auto one = GgufModel::Open(P("one-00001-of-00001.gguf"));
  ASSERT_TRUE(one.ok()) << one.status();
  ExpectSameModel(*original, *one);
}

TEST_F(GgufCommandTest, ExistingOutputsAreRefusedUnlessForced) {
  std::string in = WriteModel("m.gguf");
  ASSERT_EQ(Run({"split", "--max-tensors", "4", in, P("s")}), 0);
  std::string err;
  EXPECT_EQ(Run({"split", "--max-tensors", "4", in, P("s")}, &err), 1);
  EXPECT_THAT(err, HasSubstr("s-00001-of-00002.gguf already exists (give --force"));
  EXPECT_EQ(Run({"split", "--force", "--max-tensors", "4", in, P("s")}), 0);

  std::ofstream(P("out.gguf")) << "keep me";
  EXPECT_EQ(Run({"merge", P("s-00001-of-00002.gguf"), P("out.gguf")}, &err), 1);
  EXPECT_THAT(err, HasSubstr("out.gguf already exists"));
  EXPECT_EQ(ReadAll(P("out.gguf")), "keep me");
  EXPECT_EQ(Run({"merge", P("s-00001-of-00002.gguf"), P("s-00002-of-00002.gguf"), "--force"}, &err),
            1);
  EXPECT_THAT(err, HasSubstr("is one of the inputs"));
  EXPECT_EQ(Run({"merge", "--force", P("s-00001-of-00002.gguf"), P("out.gguf")}), 0);
  auto merged = GgufModel::Open(P("out.gguf"));
  ASSERT_TRUE(merged.ok());
  EXPECT_EQ(merged->tensors().size(), 6u);
}

TEST_F(GgufCommandTest, MissingPartIsNamed) {
  std::string in = WriteModel("m.gguf");
  ASSERT_EQ(Run({"split", "--max-tensors", "2", in, P("s")}), 0);
  fs::remove(P("s-00002-of-00003.gguf"));
  std::string err;
  EXPECT_EQ(Run({"merge", P("s-00001-of-00003.gguf"), P("out.gguf")}, &err), 1);
  EXPECT_THAT(err, HasSubstr("part 2 of 3 is missing"));
  EXPECT_FALSE(fs::exists(P("out.gguf")));
  EXPECT_EQ(Run({"merge", P("nope-00001-of-00002.gguf"), P("out.gguf")}, &err), 1);
}

TEST_F(GgufCommandTest, UsageErrors) {
  std::string in = WriteModel("m.gguf");
  std::string err;
  EXPECT_EQ(Run({"split", "--max-size", "lots", in, P("s")}, &err), 2);
  EXPECT_THAT(err, HasSubstr("--max-size: expected a size"));
  EXPECT_EQ(Run({"split", "--max-size", "0", in, P("s")}, &err), 2);
  EXPECT_EQ(Run({"split", "--max-size", "-5M", in, P("s")}, &err), 2);
  EXPECT_EQ(Run({"split", "--max-tensors", "0", in, P("s")}, &err), 2);
  EXPECT_EQ(Run({"split", "--max-tensors", "2", "--max-size", "1G", in, P("s")}, &err), 2);
  EXPECT_THAT(err, HasSubstr("exactly one of"));
  EXPECT_EQ(Run({"split", in, P("s")}, &err), 2);
  EXPECT_EQ(Run({"split", "--max-tensors", "2", in}, &err), 2);
  EXPECT_EQ(Run({"merge", in}, &err), 2);
  EXPECT_EQ(Run({"frobnicate"}, &err), 2);
  EXPECT_EQ(Run({"split", "--help"}), 0);
  // Nothing was written by the failed attempts.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(GgufCommandTest, DryRunWritesNothing) {
  std::string in = WriteModel("m.gguf");
  ::testing::internal::CaptureStdout();
  ASSERT_EQ(RunGguf({"split", "--dry-run", "--max-tensors", "4", in, P("s")}), 0);
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_THAT(out, HasSubstr("s-00002-of-00002.gguf: 2 tensors"));
  EXPECT_THAT(out, HasSubstr("would write 2 parts, 6 tensors"));
  EXPECT_FALSE(fs::exists(P("s-00001-of-00002.gguf")));
}

// A set written by GgufWriter::WriteSplit (the converter's layout) merges into exactly the
// bytes GgufWriter::WriteFile gives for the same model.
TEST_F(GgufCommandTest, MergeOfAWriterSplitSetEqualsTheWritersSingleFile) {
  GgufWriter w;
  w.metadata().Set("general.architecture", Value::String("qwen3"));
  w.metadata().Set("qwen3.block_count", Value::U32(1));
  ASSERT_TRUE(w.AddTensor("a", {64}, GgmlType::kF32, RandomBytes(256, 7)).ok());
  ASSERT_TRUE(w.AddTensor("b", {256, 2}, GgmlType::kQ4_K, RandomBytes(288, 8)).ok());
  ASSERT_TRUE(w.AddTensor("c", {32}, GgmlType::kF16, RandomBytes(64, 9)).ok());
  ASSERT_TRUE(w.WriteFile(P("single.gguf")).ok());
  auto parts = w.WriteSplit(P("w"), 1);
  ASSERT_TRUE(parts.ok());
  ASSERT_EQ(parts->size(), 3u);
  ASSERT_EQ(Run({"merge", (*parts)[1], P("merged.gguf")}), 0);
  EXPECT_TRUE(ReadAll(P("single.gguf")) == ReadAll(P("merged.gguf")));
}

}  // namespace
}  // namespace tessera::cli
