#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/gguf/split.h"
#include "common/gguf/writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::gguf {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

class SplitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessera_split_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Seven F32 tensors whose values encode their index, split 3 per part -> 3 parts.
  std::vector<std::string> WriteSet(const std::string& stem) {
    GgufWriter w;
    w.metadata().Set("general.architecture", Value::String("llama"));
    w.metadata().Set("llama.block_count", Value::U32(7));
    for (int i = 0; i < 7; ++i) {
      std::vector<float> v(16, static_cast<float>(i));
      EXPECT_TRUE(w.AddF32Tensor("blk." + std::to_string(i) + ".w", {16}, v).ok());
    }
    auto paths = w.WriteSplit((dir_ / stem).string(), 3);
    EXPECT_TRUE(paths.ok()) << paths.status();
    return *paths;
  }

  fs::path dir_;
};

TEST(SplitName, ParsesAndFormats) {
  auto s = SplitName::Parse("/m/GLM-5-UD-Q4_K_XL-00003-of-00010.gguf");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->prefix, "/m/GLM-5-UD-Q4_K_XL");
  EXPECT_EQ(s->number, 3u);
  EXPECT_EQ(s->count, 10u);
  EXPECT_EQ(SplitName::Format("/m/x", 1, 2), "/m/x-00001-of-00002.gguf");
  EXPECT_FALSE(SplitName::Parse("model.gguf").has_value());
  EXPECT_FALSE(SplitName::Parse("m-00000-of-00002.gguf").has_value());
  EXPECT_FALSE(SplitName::Parse("m-00003-of-00002.gguf").has_value());
  EXPECT_FALSE(SplitName::Parse("m-0001-of-00002.gguf").has_value());
  EXPECT_FALSE(SplitName::Parse("m-00001-of-00002.ggufx").has_value());
  EXPECT_FALSE(SplitName::Parse("m-00001_of-00002.gguf").has_value());
  EXPECT_FALSE(SplitName::Parse("-00001-of-00002.gguf").has_value());  // no prefix
}

TEST_F(SplitTest, AnyPartOpensTheWholeSet) {
  std::vector<std::string> parts = WriteSet("model");
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(fs::path(parts[1]).filename(), "model-00002-of-00003.gguf");
  for (const std::string& p : parts) {
    auto m = GgufModel::Open(p);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->part_count(), 3u);
    EXPECT_EQ(*m->metadata().GetString("general.architecture"), "llama");
    ASSERT_EQ(m->tensors().size(), 7u);
    for (int i = 0; i < 7; ++i) {
      const TensorInfo* t = m->FindTensor("blk." + std::to_string(i) + ".w");
      ASSERT_NE(t, nullptr);
      EXPECT_EQ(t->part, static_cast<uint32_t>(i / 3));
      float x;
      std::memcpy(&x, m->TensorData(*t).data() + 4 * 15, 4);
      EXPECT_EQ(x, static_cast<float>(i));
    }
    // split.* keys are in every part; the model keys only in the first.
    EXPECT_EQ(*m->part(2).metadata().GetInt("split.no"), 2);
    EXPECT_FALSE(m->part(2).metadata().Has("general.architecture"));
  }
}

TEST_F(SplitTest, MissingPartIsNamed) {
  std::vector<std::string> parts = WriteSet("model");
  fs::remove(parts[1]);
  auto m = GgufModel::Open(parts[0]);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("part 2 of 3 is missing"));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("model-00002-of-00003.gguf"));
}

TEST_F(SplitTest, SwappedPartsAreDetected) {
  std::vector<std::string> parts = WriteSet("model");
  fs::rename(parts[1], dir_ / "tmp.gguf");
  fs::rename(parts[2], parts[1]);
  fs::rename(dir_ / "tmp.gguf", parts[2]);
  auto m = GgufModel::Open(parts[0]);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("split.no is 2 but the file is part 2"));
}

TEST_F(SplitTest, PartFromAnotherSetIsDetected) {
  std::vector<std::string> a = WriteSet("a");
  // A 2-part set whose part 2 replaces part 2 of a 3-part set: split.count disagrees.
  GgufWriter w;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(w.AddZeroTensor(absl::StrCat("x", i), {4}, GgmlType::kF32).ok());
  }
  auto b = w.WriteSplit((dir_ / "b").string(), 2);
  ASSERT_TRUE(b.ok());
  fs::copy_file((*b)[1], a[1], fs::copy_options::overwrite_existing);
  auto m = GgufModel::Open(a[0]);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("split.count is 2"));
}

TEST_F(SplitTest, PlainFileIsOnePart) {
  GgufWriter w;
  ASSERT_TRUE(w.AddZeroTensor("t", {8}, GgmlType::kF16).ok());
  std::string p = (dir_ / "plain.gguf").string();
  ASSERT_TRUE(w.WriteFile(p).ok());
  auto m = GgufModel::Open(p);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->part_count(), 1u);
  EXPECT_EQ(m->tensors().size(), 1u);
  EXPECT_EQ(m->total_tensor_bytes(), 16u);
}

TEST_F(SplitTest, SplitPartWithUnconventionalNameIsAClearError) {
  std::vector<std::string> parts = WriteSet("model");
  std::string renamed = (dir_ / "renamed.gguf").string();
  fs::rename(parts[0], renamed);
  auto m = GgufModel::Open(renamed);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("does not follow"));
}

TEST_F(SplitTest, ZeroTensorsAreSparse) {
  GgufWriter w;
  ASSERT_TRUE(w.AddZeroTensor("big", {1024, 1024, 64}, GgmlType::kQ4_K).ok());  // 36 MiB
  std::string p = (dir_ / "sparse.gguf").string();
  ASSERT_TRUE(w.WriteFile(p).ok());
  auto m = GgufModel::Open(p);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->FindTensor("big")->n_bytes, 1024u / 256 * 144 * 1024 * 64);
  EXPECT_GE(fs::file_size(p), m->FindTensor("big")->n_bytes);
}

}  // namespace
}  // namespace tessera::gguf

namespace tessera::gguf {
namespace {

// llama-gguf-split --merge writes the merged file with split.count = 0 (and keeps split.no
// and split.tensors.count): a whole file that opens as one part, whatever its name.
TEST(SplitCountZero, MergedByLlamaCppOpensAsOneFile) {
  GgufWriter w;
  w.metadata().Set("general.architecture", Value::String("llama"));
  w.metadata().Set("split.no", Value::U16(0));
  w.metadata().Set("split.count", Value::U16(0));
  w.metadata().Set("split.tensors.count", Value::I32(2));
  for (int i = 0; i < 2; ++i) {
    std::vector<float> v(8, static_cast<float>(i));
    ASSERT_TRUE(w.AddF32Tensor(absl::StrCat("t", i), {8}, v).ok());
  }
  const std::string path =
      (fs::temp_directory_path() /
       ("tessera-merged-" + std::to_string(::getpid()) + "-00001-of-00003.gguf"))
          .string();
  ASSERT_TRUE(w.WriteFile(path).ok());
  auto m = GgufModel::Open(path);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->part_count(), 1u);
  EXPECT_EQ(m->tensors().size(), 2u);
  fs::remove(path);
}

}  // namespace
}  // namespace tessera::gguf
