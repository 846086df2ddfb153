#include "common/gguf/reader.h"

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/gguf/writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/gguf_bytes.h"

namespace tessera::gguf {
namespace {

using ::tessera::testing::GgufBytes;
using ::testing::HasSubstr;

absl::StatusOr<std::unique_ptr<GgufFile>> ParseBytes(const std::vector<uint8_t>& b) {
  return GgufFile::Parse(absl::MakeConstSpan(b), "test.gguf");
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(GgufReader, RoundTripsEveryValueType) {
  GgufWriter w;
  Metadata& md = w.metadata();
  md.Set("u8", Value::U8(250));
  md.Set("i8", Value::I8(-120));
  md.Set("u16", Value::U16(65000));
  md.Set("i16", Value::I16(-32000));
  md.Set("u32", Value::U32(4000000000u));
  md.Set("i32", Value::I32(-2000000000));
  md.Set("f32", Value::F32(0.1f));
  md.Set("bool", Value::Bool(true));
  md.Set("string", Value::String("héllo\n\0x"));
  md.Set("u64", Value::U64(18000000000000000000ull));
  md.Set("i64", Value::I64(-9000000000000000000ll));
  md.Set("f64", Value::F64(1e300));
  md.Set("empty_string", Value::String(""));
  md.Set("empty_array", Value::MakeArray(ValueType::kInt32, {}));
  md.Set("strings", Value::StringArray({"a", "", "ccc"}));
  md.Set("floats", Value::F32Array({1.5f, -2.25f}));
  md.Set("nested", Value::MakeArray(ValueType::kArray,
                                    {Value::StringArray({"x", "y"}), Value::I32Array({1, 2, 3}),
                                     Value::MakeArray(ValueType::kArray, {Value::U32Array({7})})}));
  for (uint32_t version : {2u, 3u}) {
    w.set_version(version);
    std::vector<uint8_t> bytes = w.WriteToBuffer();
    auto f = ParseBytes(bytes);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ((*f)->version(), version);
    ASSERT_EQ((*f)->metadata().size(), md.size());
    for (size_t i = 0; i < md.size(); ++i) {
      const auto& [key, value] = md.entries()[i];
      EXPECT_EQ((*f)->metadata().entries()[i].first, key);
      EXPECT_TRUE((*f)->metadata().entries()[i].second == value) << key;
    }
    EXPECT_TRUE((*f)->tensors().empty());
  }
}

TEST(GgufReader, ReadsHandEncodedFile) {
  // Independently encoded: 1 key, 2 tensors (F32 {4,2}, F16 {8}), alignment 32.
  GgufBytes b;
  b.Header(3, 2, 1).KeyString("general.architecture", "llama");
  b.TensorInfo("a", {4, 2}, 0, 0).TensorInfo("b", {8}, 1, 32);
  b.PadTo(32);
  size_t data_start = b.size();
  for (int i = 0; i < 8; ++i) b.Put<float>(static_cast<float>(i) * 0.5f);
  b.PadTo(32);
  for (int i = 0; i < 8; ++i) b.Put<uint16_t>(0x3c00);  // fp16 1.0
  auto f = ParseBytes(b.bytes());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->data_offset(), data_start);
  EXPECT_EQ(*(*f)->metadata().GetString("general.architecture"), "llama");
  const TensorInfo* a = (*f)->FindTensor("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->n_elements, 8u);
  EXPECT_EQ(a->n_bytes, 32u);
  EXPECT_EQ(a->rows(), 2u);
  EXPECT_EQ(a->file_offset, data_start);
  float x;
  std::memcpy(&x, (*f)->TensorData(*a).data() + 4 * 3, 4);
  EXPECT_EQ(x, 1.5f);
  const TensorInfo* t = (*f)->FindTensor("b");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, GgmlType::kF16);
  EXPECT_EQ(t->n_bytes, 16u);
  EXPECT_EQ(t->file_offset, data_start + 32);
  EXPECT_EQ((*f)->FindTensor("c"), nullptr);
}

TEST(GgufReader, TensorByteSizesFollowBlockGeometry) {
  // Q4_K: 256 elements in 144 bytes; a {512, 3} tensor is 6 blocks = 864 bytes.
  GgufWriter w;
  ASSERT_TRUE(w.AddZeroTensor("q", {512, 3}, GgmlType::kQ4_K).ok());
  ASSERT_TRUE(w.AddZeroTensor("r", {64, 2, 2}, GgmlType::kQ8_0).ok());  // 8 blocks * 34
  w.set_alignment(64);
  std::vector<uint8_t> bytes = w.WriteToBuffer();
  auto f = ParseBytes(bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->alignment(), 64u);
  EXPECT_EQ((*f)->FindTensor("q")->n_bytes, 864u);
  EXPECT_EQ((*f)->FindTensor("r")->n_bytes, 272u);
  EXPECT_EQ((*f)->FindTensor("r")->offset, 896u);  // 864 rounded up to 64
  EXPECT_EQ((*f)->data_offset() % 64, 0u);
}

TEST(GgufReader, RejectsVersionOneAndBigEndianWithClearErrors) {
  GgufBytes v1;
  v1.Header(1, 0, 0);
  auto f = ParseBytes(v1.bytes());
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(Message(f.status()), HasSubstr("version 1"));

  GgufBytes be;
  be.Header(0x03000000, 0, 0);  // version 3 written big-endian
  f = ParseBytes(be.bytes());
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(Message(f.status()), HasSubstr("big-endian"));

  GgufBytes v4;
  v4.Header(4, 0, 0);
  f = ParseBytes(v4.bytes());
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(Message(f.status()), HasSubstr("version: expected 2 or 3, file has 4"));
}

TEST(GgufReader, RejectsBadMagic) {
  std::vector<uint8_t> b = {'G', 'G', 'M', 'L', 3, 0, 0, 0};
  auto f = ParseBytes(b);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(Message(f.status()), HasSubstr("not a GGUF file"));
  EXPECT_THAT(Message(f.status()), HasSubstr("offset 0"));
}

struct BadCase {
  const char* name;
  GgufBytes bytes;
  const char* expected;
};

std::vector<BadCase> BadFiles() {
  std::vector<BadCase> cases;
  auto add = [&](const char* name, GgufBytes b, const char* expected) {
    cases.push_back({name, std::move(b), expected});
  };
  {
    GgufBytes b;
    b.Header(3, 0, 1).Str("k").Put<uint32_t>(13).Put<uint32_t>(0);
    add("bad value type", b, "value type 13 is not a GGUF value type");
  }
  {
    GgufBytes b;
    b.Header(3, 0, 1).Put<uint64_t>(1000).Put<uint32_t>(0).Zeros(20);
    add("string past end", b, "string length 1000 exceeds");
  }
  {
    GgufBytes b;
    b.Header(3, 0, 2).KeyU32("k", 1).KeyU32("k", 2);
    add("duplicate key", b, "key 'k' appears twice");
  }
  {
    GgufBytes b;
    b.Header(3, 0, 1).Str("").Put<uint32_t>(4).Put<uint32_t>(1);
    add("empty key", b, "empty key");
  }
  {
    GgufBytes b;
    b.Header(3, 0, 1).Str("a").Put<uint32_t>(9).Put<uint32_t>(4).Put<uint64_t>(1ull << 40);
    add("array longer than file", b, "cannot fit");
  }
  {
    GgufBytes b;
    b.Header(3, 0, 1).Str("b").Put<uint32_t>(7).Put<uint8_t>(2);
    add("bool not 0/1", b, "bool value 2");
  }
  {
    GgufBytes b;
    b.Header(3, 1ull << 50, 0);
    add("absurd tensor count", b, "tensors cannot fit");
  }
  {
    GgufBytes b;
    b.Header(3, 0, 1ull << 60);
    add("absurd key count", b, "keys cannot fit");
  }
  {
    GgufBytes b;
    b.Header(3, 0, 1).Str("general.alignment").Put<uint32_t>(4).Put<uint32_t>(24);
    add("alignment not a power of two", b, "general.alignment");
  }
  {
    GgufBytes b;
    b.Header(3, 1, 0).TensorInfo("t", {1, 1, 1, 1, 1}, 0, 0).PadTo(32).Zeros(32);
    add("five dims", b, "n_dims 5 exceeds 4");
  }
  {
    GgufBytes b;
    b.Header(3, 1, 0).TensorInfo("t", {4, -1}, 0, 0).PadTo(32).Zeros(32);
    add("negative dim", b, "dims[1] is negative");
  }
  {
    GgufBytes b;
    b.Header(3, 1, 0).TensorInfo("t", {1ll << 40, 1ll << 40}, 0, 0).PadTo(32);
    add("element count overflow", b, "element count overflows");
  }
  {
    GgufBytes b;
    b.Header(3, 1, 0).TensorInfo("t", {32}, 4, 0).PadTo(32).Zeros(32);
    add("retired type id", b, "type id 4 is not a ggml type");
  }
  {
    GgufBytes b;
    b.Header(3, 1, 0).TensorInfo("t", {16}, 2, 0).PadTo(32).Zeros(32);
    add("row not a block multiple", b, "not a multiple of the q4_0 block size 32");
  }
  {
    GgufBytes b;
    b.Header(3, 1, 0).TensorInfo("t", {8}, 0, 8).PadTo(32).Zeros(64);
    add("misaligned offset", b, "not a multiple of the alignment 32");
  }
  {
    GgufBytes b;
    b.Header(3, 1, 0).TensorInfo("t", {64}, 0, 0).PadTo(32).Zeros(100);
    add("data past end of file", b, "runs past the end of the file");
  }
  {
    GgufBytes b;
    b.Header(3, 2, 0).TensorInfo("a", {16}, 0, 0).TensorInfo("b", {16}, 0, 32).PadTo(32);
    b.Zeros(128);
    add("overlapping tensors", b, "overlaps tensor 'a'");
  }
  {
    GgufBytes b;
    b.Header(3, 2, 0).TensorInfo("a", {8}, 0, 0).TensorInfo("a", {8}, 0, 32).PadTo(32);
    b.Zeros(64);
    add("duplicate tensor", b, "tensor 'a' appears twice");
  }
  {
    GgufBytes b;
    b.Header(3, 1, 0).TensorInfo(std::string(64, 'x'), {8}, 0, 0).PadTo(32).Zeros(32);
    add("name too long", b, "names must be shorter than 64");
  }
  return cases;
}

TEST(GgufReader, MalformedFilesGiveErrorsNamingTheField) {
  for (const BadCase& c : BadFiles()) {
    auto f = ParseBytes(c.bytes.bytes());
    ASSERT_FALSE(f.ok()) << c.name;
    EXPECT_THAT(Message(f.status()), HasSubstr(c.expected)) << c.name;
    EXPECT_THAT(Message(f.status()), HasSubstr("test.gguf")) << c.name;
  }
}

TEST(GgufReader, OpenReportsMissingFile) {
  auto f = GgufFile::Open("/nonexistent/dir/model.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(f.status()), HasSubstr("/nonexistent/dir/model.gguf"));
}

TEST(GgufMetadata, TypedGettersNameKeyAndTypes) {
  Metadata md;
  md.Set("a.count", Value::U16(7));
  md.Set("a.name", Value::String("x"));
  md.Set("a.list", Value::I32Array({1, -2}));
  md.Set("a.flags", Value::MakeArray(ValueType::kBool, {Value::Bool(true), Value::Bool(false)}));
  EXPECT_EQ(*md.GetInt("a.count"), 7);  // any integer width is accepted
  EXPECT_EQ(*md.GetUint("a.count"), 7u);
  EXPECT_EQ(*md.GetFloat("a.count"), 7.0);
  EXPECT_EQ(*md.GetInt("a.missing", 42), 42);
  EXPECT_EQ(*md.GetIntArray("a.list"), (std::vector<int64_t>{1, -2}));
  EXPECT_EQ(*md.GetIntArray("a.flags"), (std::vector<int64_t>{1, 0}));
  auto s = md.GetInt("a.name");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(Message(s.status()), "metadata key 'a.name': expected an integer, file has string");
  auto arr = md.GetStringArray("a.list");
  EXPECT_EQ(Message(arr.status()),
            "metadata key 'a.list': expected array of string, file has array of int32");
  EXPECT_EQ(md.GetString("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(md.GetUint("a.list").ok());
}

TEST(GgufWriter, RejectsBadTensors) {
  GgufWriter w;
  std::vector<uint8_t> four(4);
  EXPECT_TRUE(w.AddTensor("t", {1}, GgmlType::kF32, four).ok());
  EXPECT_EQ(w.AddTensor("t", {1}, GgmlType::kF32, four).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_FALSE(w.AddTensor("u", {2}, GgmlType::kF32, four).ok());  // wrong byte count
  EXPECT_FALSE(w.AddZeroTensor("v", {16}, GgmlType::kQ4_0).ok());  // not a block multiple
  EXPECT_FALSE(w.AddZeroTensor("w", {1, 1, 1, 1, 1}, GgmlType::kF32).ok());
  EXPECT_FALSE(w.AddZeroTensor(std::string(64, 'n'), {1}, GgmlType::kF32).ok());
}

// Rewriting a file replaces it (a new inode renamed over the old one): a reader that has the
// old file mapped keeps its bytes — writing in place, truncated, would make its next touch of
// a page past the new end fault with SIGBUS — and a new reader sees the new file. A failed
// write leaves nothing behind.
TEST(GgufWriter, RewritingAFileLeavesItsReadersTheOldBytes) {
  const std::string dir = ::testing::TempDir() + "/gguf-rewrite";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/model.gguf";
  std::vector<float> big(1 << 16);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i);
  GgufWriter first;
  ASSERT_TRUE(first.AddF32Tensor("t", {static_cast<int64_t>(big.size())}, big).ok());
  ASSERT_TRUE(first.WriteFile(path).ok());
  auto old_file = GgufFile::Open(path);
  ASSERT_TRUE(old_file.ok()) << old_file.status();

  GgufWriter second;
  const std::vector<float> small = {-1.0f, -2.0f};
  ASSERT_TRUE(second.AddF32Tensor("t", {2}, small).ok());
  ASSERT_TRUE(second.WriteFile(path).ok());
  absl::Span<const uint8_t> old_data = (*old_file)->TensorData((*old_file)->tensors()[0]);
  ASSERT_EQ(old_data.size(), big.size() * sizeof(float));
  float last = 0;
  std::memcpy(&last, old_data.data() + old_data.size() - sizeof(float), sizeof(float));
  EXPECT_EQ(last, static_cast<float>(big.size() - 1));  // the old file's last page

  auto new_file = GgufFile::Open(path);
  ASSERT_TRUE(new_file.ok()) << new_file.status();
  EXPECT_EQ((*new_file)->TensorData((*new_file)->tensors()[0]).size(), small.size() * 4);
  EXPECT_FALSE(second.WriteFile(dir + "/missing/model.gguf").ok());
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  EXPECT_EQ(names, std::vector<std::string>{"model.gguf"}) << "no temporary files left";
}

TEST(GgmlType, TableMatchesSpec) {
  EXPECT_EQ(LookupGgmlType(12)->block_bytes, 144u);
  EXPECT_EQ(LookupGgmlType(14)->block_bytes, 210u);
  EXPECT_EQ(LookupGgmlType(30)->name, "bf16");
  EXPECT_EQ(LookupGgmlType(4), nullptr);
  EXPECT_EQ(LookupGgmlType(31), nullptr);
  EXPECT_EQ(GgmlTypeFromName("Q4_K"), GgmlType::kQ4_K);
  EXPECT_EQ(GgmlTypeName(99), "type#99");
}

}  // namespace
}  // namespace tessera::gguf
