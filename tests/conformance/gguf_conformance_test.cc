#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "common/gguf/split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/shared_data.h"
#include "tools/commands.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

// A deliberately tiny GGUF scanner, written apart from common/gguf, that only counts keys
// and collects tensor names and type ids. It trusts the file (these are known-good files).
struct Scan {
  uint64_t n_keys = 0;
  std::map<std::string, uint32_t> tensor_types;
};

class Scanner {
 public:
  explicit Scanner(const std::vector<char>& b) : b_(b) {}
  template <typename T>
  T Get() {
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  std::string Str() {
    uint64_t n = Get<uint64_t>();
    std::string s(b_.data() + pos_, n);
    pos_ += n;
    return s;
  }
  void SkipValue(uint32_t type) {
    static const size_t kSizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type == 8) {
      Str();
    } else if (type == 9) {
      uint32_t et = Get<uint32_t>();
      uint64_t n = Get<uint64_t>();
      for (uint64_t i = 0; i < n; ++i) SkipValue(et);
    } else {
      pos_ += kSizes[type];
    }
  }
  Scan Run() {
    Scan s;
    Get<uint32_t>();  // magic
    Get<uint32_t>();  // version
    uint64_t n_tensors = Get<uint64_t>();
    s.n_keys = Get<uint64_t>();
    for (uint64_t i = 0; i < s.n_keys; ++i) {
      Str();
      SkipValue(Get<uint32_t>());
    }
    for (uint64_t i = 0; i < n_tensors; ++i) {
      std::string name = Str();
      uint32_t nd = Get<uint32_t>();
      pos_ += 8 * nd;
      s.tensor_types[name] = Get<uint32_t>();
      Get<uint64_t>();
    }
    return s;
  }

 private:
  const std::vector<char>& b_;
  size_t pos_ = 0;
};

Scan ScanFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return Scanner(bytes).Run();
}

std::vector<fs::path> ConformanceGgufs(const fs::path& root) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_regular_file() && e.path().extension() == ".gguf") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

nlohmann::json InspectJson(const std::string& path) {
  ::testing::internal::CaptureStdout();
  int rc = cli::RunInspect({path, "--json", "--tensors"});
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0) << path;
  return nlohmann::json::parse(out);
}

TEST(GgufConformance, EveryFileOpensAndInspectAgreesWithAnIndependentScan) {
  TESSERA_REQUIRE_CONFORMANCE(root, "");
  std::vector<fs::path> files = ConformanceGgufs(root);
  ASSERT_GE(files.size(), 14u) << "expected the tokenizer, model and quant files";
  for (const fs::path& p : files) {
    SCOPED_TRACE(p.string());
    auto model = gguf::GgufModel::Open(p.string());
    ASSERT_TRUE(model.ok()) << model.status();
    Scan scan = ScanFile(p);
    nlohmann::json j = InspectJson(p.string());
    EXPECT_EQ(j["metadata_key_count"].get<uint64_t>(), scan.n_keys);
    EXPECT_EQ(j["tensor_count"].get<uint64_t>(), scan.tensor_types.size());
    ASSERT_EQ(j["tensors"].size(), scan.tensor_types.size());
    for (const auto& t : j["tensors"]) {
      auto it = scan.tensor_types.find(t["name"].get<std::string>());
      ASSERT_NE(it, scan.tensor_types.end()) << t["name"];
      EXPECT_EQ(t["type"].get<std::string>(), gguf::GgmlTypeName(it->second));
    }
  }
}

TEST(GgufConformance, ModelTensorTypesMatchMetaJson) {
  TESSERA_REQUIRE_CONFORMANCE(models, "models");
  int checked = 0;
  for (const auto& dir : fs::directory_iterator(models)) {
    if (!fs::exists(dir.path() / "meta.json")) continue;
    SCOPED_TRACE(dir.path().string());
    std::ifstream in(dir.path() / "meta.json");
    nlohmann::json meta = nlohmann::json::parse(in);
    auto model = gguf::GgufModel::Open((dir.path() / "model.gguf").string());
    ASSERT_TRUE(model.ok()) << model.status();
    const auto& types = meta["tensor_types"];
    EXPECT_EQ(model->tensors().size(), types.size());
    for (const auto& [name, type] : types.items()) {
      const gguf::TensorInfo* t = model->FindTensor(name);
      ASSERT_NE(t, nullptr) << name;
      EXPECT_EQ(absl::AsciiStrToLower(gguf::GgmlTypeName(static_cast<uint32_t>(t->type))),
                absl::AsciiStrToLower(type.get<std::string>()))
          << name;
    }
    EXPECT_EQ(*model->metadata().GetString("general.architecture"), meta["arch"]);
    ++checked;
  }
  EXPECT_GE(checked, 8);
}

}  // namespace
}  // namespace tessera
