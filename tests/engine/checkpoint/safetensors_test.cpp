// The safetensors writer and reader: round trips of every dtype (including 0-element and scalar
// tensors), the byte layout of a tiny file against hand-computed bytes, one test per way a file can
// be corrupt, the atomic write (with an injected write failure), and independent readers in Python:
// a json + struct parser that always runs, torch.frombuffer and the safetensors package when found.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "core/error.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;
using Named = std::vector<std::pair<std::string, Tensor>>;

constexpr const char* kPython = "/usr/bin/python3";

::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" lacks \"" << part << "\"";
}

// A tensor of `dtype` and `shape` whose bytes are 0, 1, 2, ... (mod 251).
Tensor patterned(DType dtype, const Shape& shape, int salt = 0) {
  Tensor t = Tensor::empty(shape, dtype);
  auto* bytes = static_cast<uint8_t*>(t.raw());
  for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<uint8_t>((i + salt) % 251);
  return t;
}

Bytes tensorBytes(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.raw());
  return Bytes(p, p + t.nbytes());
}

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ringmaster_safetensors_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  static void writeRaw(const std::string& path, const Bytes& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
  static Bytes readRaw(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(in), {});
  }
  // A file with the given header text, header length (default: its size) and data bytes.
  std::string craft(const std::string& name, const std::string& header, size_t data_bytes,
                    std::optional<uint64_t> header_length = std::nullopt) {
    Bytes bytes(8);
    const uint64_t n = header_length.value_or(header.size());
    std::memcpy(bytes.data(), &n, 8);
    bytes.insert(bytes.end(), header.begin(), header.end());
    bytes.insert(bytes.end(), data_bytes, uint8_t{0});
    writeRaw(path(name), bytes);
    return path(name);
  }
  // Loads a file that must fail, and returns its error.
  static Error loadError(const std::string& file) {
    try {
      loadSafetensors(file);
    } catch (const Error& e) {
      return e;
    }
    ADD_FAILURE() << "loading " << file << " did not fail";
    return Error(ErrorKind::kInternal, "", "", 0);
  }
  // Runs a Python script on `file`; returns its stdout, or nullopt when it exits non-zero.
  std::optional<std::string> runPython(const std::string& script, const std::string& file) {
    const std::string script_path = path("reader.py");
    std::ofstream(script_path) << script;
    const std::string command =
        fmt::format("{} {} {} 2>{}", kPython, script_path, file, path("stderr.txt"));
    std::FILE* pipe = ::popen(command.c_str(), "r");
    if (!pipe) return std::nullopt;
    std::string out;
    char buffer[4096];
    size_t got;
    while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, got);
    const int status = ::pclose(pipe);
    if (status != 0) {
      std::ifstream err(path("stderr.txt"));
      python_stderr_.assign(std::istreambuf_iterator<char>(err), {});
      return std::nullopt;
    }
    return out;
  }
  static bool pythonHas(const std::string& module) {
    if (::access(kPython, X_OK) != 0) return false;
    const std::string command = fmt::format("{} -c 'import {}' >/dev/null 2>&1", kPython, module);
    return std::system(command.c_str()) == 0;
  }

  fs::path dir_;
  std::string python_stderr_;
};

// -------------------------------------------------------------------------------------------------
// Round trips and layout

// One tensor of every dtype, an empty one and a scalar.
Named everyDType() {
  return Named{
      {"w.f32", patterned(DType::kF32, {2, 3})},    {"w.bf16", patterned(DType::kBF16, {4}, 1)},
      {"w.f16", patterned(DType::kF16, {3, 1}, 2)}, {"w.f64", patterned(DType::kF64, {2, 2}, 3)},
      {"w.i32", patterned(DType::kI32, {5}, 4)},    {"w.i64", patterned(DType::kI64, {1, 3}, 5)},
      {"w.u8", patterned(DType::kU8, {7}, 6)},      {"empty", Tensor::empty({0, 4}, DType::kF32)},
      {"scalar", Tensor::fromVector({2.5f}, {})}};
}

TEST_F(SafetensorsTest, RoundTripsEveryDTypeAndShape) {
  const Named tensors = everyDType();
  const std::map<std::string, std::string> metadata{
      {"format", "pt"}, {"step", "42"}, {"note", "utf-8 ünïcode, \"quoted\"\n"}};
  saveSafetensors(path("a.safetensors"), tensors, metadata);
  const SafetensorsFile loaded = loadSafetensors(path("a.safetensors"));
  EXPECT_EQ(loaded.metadata, metadata);
  ASSERT_EQ(loaded.tensors.size(), tensors.size());
  for (const auto& [name, tensor] : tensors) {
    SCOPED_TRACE(name);
    const Tensor& back = loaded.tensors.at(name);
    EXPECT_EQ(back.dtype(), tensor.dtype());
    EXPECT_EQ(back.shape(), tensor.shape());
    EXPECT_FALSE(back.device().isCuda());
    EXPECT_EQ(tensorBytes(back), tensorBytes(tensor));
  }
  EXPECT_EQ(loaded.tensors.at("scalar").shape(), Shape{});
  EXPECT_EQ(loaded.tensors.at("scalar").toFloatVector(), std::vector<float>{2.5f});
  EXPECT_EQ(loaded.tensors.at("empty").numel(), 0);
}

TEST_F(SafetensorsTest, EmptyFileAndNoMetadata) {
  saveSafetensors(path("none.safetensors"), {});
  // {} padded to 8 bytes, no data.
  const Bytes raw = readRaw(path("none.safetensors"));
  Bytes expected{8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '};
  EXPECT_EQ(raw, expected);
  const SafetensorsFile loaded = loadSafetensors(path("none.safetensors"));
  EXPECT_TRUE(loaded.tensors.empty());
  EXPECT_TRUE(loaded.metadata.empty());
}

TEST_F(SafetensorsTest, ViewsAndSharedStorageAreWrittenAsTheirElements) {
  Tensor whole = Tensor::fromVector({0, 1, 2, 3, 4, 5, 6, 7}, {4, 2});
  saveSafetensors(path("v.safetensors"), {{"rows", whole.narrowRows(1, 2)}, {"all", whole}});
  const SafetensorsFile loaded = loadSafetensors(path("v.safetensors"));
  EXPECT_EQ(loaded.tensors.at("rows").toFloatVector(), (std::vector<float>{2, 3, 4, 5}));
  EXPECT_EQ(loaded.tensors.at("all").toFloatVector().size(), 8u);
}

// The exact bytes of a tiny file, worked out by hand: tensors are laid out by element size
// (largest first) then by name, "__metadata__" leads the header, and the header is padded with
// spaces to a multiple of 8.
TEST_F(SafetensorsTest, ByteLayoutOfATinyFile) {
  const Named tensors{{"b", Tensor::fromInts({1, -1}, {2})},
                      {"c", patterned(DType::kU8, {3}, 1)},  // bytes 1, 2, 3
                      {"a", Tensor::fromVector({1.0f}, {})}};
  saveSafetensors(path("tiny.safetensors"), tensors, {{"k", "v"}});
  const std::string json = R"({"__metadata__":{"k":"v"},)"
                           R"("a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                           R"("b":{"dtype":"I32","shape":[2],"data_offsets":[4,12]},)"
                           R"("c":{"dtype":"U8","shape":[3],"data_offsets":[12,15]}})";
  ASSERT_EQ(json.size(), 186u);  // + 6 spaces = 192 = 0xC0
  Bytes expected{0xC0, 0, 0, 0, 0, 0, 0, 0};
  expected.insert(expected.end(), json.begin(), json.end());
  expected.insert(expected.end(), 6, ' ');
  const Bytes data{0x00, 0x00, 0x80, 0x3F,  // a: 1.0f
                   0x01, 0x00, 0x00, 0x00,  // b[0]: 1
                   0xFF, 0xFF, 0xFF, 0xFF,  // b[1]: -1
                   0x01, 0x02, 0x03};       // c
  expected.insert(expected.end(), data.begin(), data.end());
  EXPECT_EQ(readRaw(path("tiny.safetensors")), expected);
}

TEST_F(SafetensorsTest, TensorsAreAlignedToTheirElementSize) {
  saveSafetensors(path("a.safetensors"), everyDType());
  const Bytes raw = readRaw(path("a.safetensors"));
  uint64_t n;
  std::memcpy(&n, raw.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  const auto header = nlohmann::json::parse(raw.begin() + 8, raw.begin() + 8 + n);
  for (const auto& [name, info] : header.items()) {
    DType dtype;
    ASSERT_TRUE(parseDTypeName(info["dtype"].get<std::string>(), &dtype));
    EXPECT_EQ(info["data_offsets"][0].get<uint64_t>() % dtypeSize(dtype), 0u) << name;
  }
}

TEST_F(SafetensorsTest, ReadsHeadersOtherWritersProduce) {
  // Keys in another order, "__metadata__" last, unknown fields, no padding (N = 97 is not a
  // multiple of 8): what the format allows must load.
  const std::string header = R"({"x":{"data_offsets":[0,2],"shape":[2],"dtype":"U8","extra":1},)"
                             R"("__metadata__":{"format":"np"}} )";
  const std::string file = craft("other.safetensors", header, 0);
  {
    std::ofstream out(file, std::ios::binary | std::ios::app);
    out.write("\x07\x09", 2);
  }
  const SafetensorsFile loaded = loadSafetensors(file);
  EXPECT_EQ(loaded.metadata.at("format"), "np");
  EXPECT_EQ(tensorBytes(loaded.tensors.at("x")), (Bytes{7, 9}));
}

TEST_F(SafetensorsTest, CudaTensorsAreCopiedToTheHost) {
  if (!cudaAvailable()) GTEST_SKIP() << "no CUDA device in this build or on this machine";
  Tensor host = Tensor::fromVector({1, 2, 3, 4}, {2, 2});
  saveSafetensors(path("cuda.safetensors"), {{"w", host.to(Device::cuda(0))}});
  const SafetensorsFile loaded = loadSafetensors(path("cuda.safetensors"));
  EXPECT_EQ(loaded.tensors.at("w").toFloatVector(), host.toFloatVector());
  EXPECT_FALSE(loaded.tensors.at("w").device().isCuda());
}

// -------------------------------------------------------------------------------------------------
// Writer arguments and atomicity

TEST_F(SafetensorsTest, WriterRejectsBadNames) {
  Tensor t = Tensor::fromVector({1}, {1});
  auto kind = [&](const Named& tensors) {
    try {
      saveSafetensors(path("bad.safetensors"), tensors);
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::kInternal;
  };
  EXPECT_EQ(kind({{"a", t}, {"a", t}}), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind({{"__metadata__", t}}), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind({{"a", Tensor()}}), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind({{"\xff\xfe", t}}), ErrorKind::kInvalidArgument);  // not UTF-8
  EXPECT_FALSE(fs::exists(path("bad.safetensors")));
  EXPECT_FALSE(fs::exists(path("bad.safetensors.tmp")));
}

TEST_F(SafetensorsTest, AtomicWriteLeavesNoTemporaryAndReplaces) {
  const std::string file = path("model.safetensors");
  saveSafetensors(file, {{"w", Tensor::fromVector({1, 2}, {2})}});
  EXPECT_FALSE(fs::exists(file + ".tmp"));
  // A stale temporary from a crashed writer neither breaks the next write nor survives it.
  writeRaw(file + ".tmp", Bytes{1, 2, 3});
  saveSafetensors(file, {{"w", Tensor::fromVector({3, 4, 5}, {3})}});
  EXPECT_FALSE(fs::exists(file + ".tmp"));
  EXPECT_EQ(loadSafetensors(file).tensors.at("w").toFloatVector(), (std::vector<float>{3, 4, 5}));
  // No directory: kIo, nothing created.
  try {
    saveSafetensors(path("missing/model.safetensors"), {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_TRUE(contains(e.message(), "cannot create " + path("missing/model.safetensors.tmp")));
  }
}

// Fault injection: a file size limit makes write() fail with EFBIG halfway through the data. The
// old checkpoint must survive untouched and the temporary must be gone.
TEST_F(SafetensorsTest, FailedWriteKeepsTheOldFile) {
  const std::string file = path("model.safetensors");
  saveSafetensors(file, {{"w", Tensor::fromVector({1, 2}, {2})}});
  const Bytes before = readRaw(file);

  rlimit old_limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit limit = old_limit;
  limit.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  std::optional<Error> error;
  try {
    saveSafetensors(file, {{"w", Tensor::zeros({1 << 16})}});
  } catch (const Error& e) {
    error = e;
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);

  ASSERT_TRUE(error.has_value()) << "the write did not fail";
  EXPECT_EQ(error->kind(), ErrorKind::kIo);
  EXPECT_TRUE(contains(error->message(), "cannot write " + file + ".tmp"));
  EXPECT_TRUE(contains(error->message(), std::strerror(EFBIG)));
  EXPECT_FALSE(fs::exists(file + ".tmp"));
  EXPECT_EQ(readRaw(file), before);
}

// -------------------------------------------------------------------------------------------------
// Corrupt files: each is a kFormat error naming the file and, where there is one, the tensor.

struct CorruptCase {
  const char* label;
  std::string header;
  size_t data_bytes;
  std::vector<std::string> message_parts;
};

TEST_F(SafetensorsTest, CorruptHeadersAreFormatErrors) {
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::vector<CorruptCase> cases{
      {"not json", R"({"a":{"dtype":"F32",)", 0, {"the header is not valid JSON"}},
      {"not an object", R"([1, 2])", 0, {"the header does not start with '{'"}},
      {"invalid utf-8", "{\"\xff\":1}", 0, {"the header is not valid JSON"}},
      {"duplicate tensor",
       R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
       R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
       2,
       {"the header names 'a' twice"}},
      {"duplicate field",
       R"({"a":{"dtype":"U8","dtype":"F32","shape":[1],"data_offsets":[0,1]}})",
       1,
       {"key \"dtype\" appears twice in the header entry 'a'"}},
      {"entry not an object", R"({"a":[1]})", 0, {"tensor 'a': expected an object, found array"}},
      {"unknown dtype",
       R"({"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})",
       1,
       {"tensor 'a': unknown dtype \"F8_E4M3\""}},
      {"dtype not a string",
       R"({"a":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})",
       4,
       {"tensor 'a': \"dtype\" is number, not a string"}},
      {"no dtype", R"({"a":{"shape":[1],"data_offsets":[0,4]}})", 4, {"tensor 'a': no \"dtype\""}},
      {"no shape",
       R"({"a":{"dtype":"F32","data_offsets":[0,4]}})",
       4,
       {"tensor 'a': no \"shape\""}},
      {"negative dimension",
       R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})",
       4,
       {"tensor 'a': \"shape\" [-1] holds -1, not a non-negative integer"}},
      {"fractional dimension",
       R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})",
       4,
       {"tensor 'a': \"shape\" [1.5] holds 1.5"}},
      {"no offsets",
       R"({"a":{"dtype":"F32","shape":[1]}})",
       4,
       {"tensor 'a': no \"data_offsets\""}},
      {"three offsets",
       R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})",
       8,
       {"tensor 'a': \"data_offsets\" [0,4,8] is not a pair"}},
      {"reversed offsets",
       R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})",
       4,
       {"tensor 'a': data_offsets [4, 0] end before they begin"}},
      {"size mismatch",
       R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})",
       20,
       {"tensor 'a': shape [2,3] of F32 needs 24 bytes, but data_offsets [0, 20] span 20"}},
      {"huge shape",
       R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,2],"data_offsets":[0,8]}})",
       8,
       {"tensor 'a': shape", "needs more than 2^64 bytes"}},
      {"out of bounds",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
       4,
       {"tensor 'a': data_offsets [0, 8] run past the end of the data region (4 bytes)"}},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       8,
       {"tensors 'a' [0, 8] and 'b' [4, 8] overlap"}},
      {"gap",
       R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
       R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
       12,
       {"data bytes [4, 8) before tensor 'b' belong to no tensor"}},
      {"trailing data", ok, 12, {"data bytes [8, 12) at the end of the file belong to no tensor"}},
      {"metadata not an object",
       R"({"__metadata__":[]})",
       0,
       {"\"__metadata__\" is array, not an object of strings"}},
      {"metadata not strings",
       R"({"__metadata__":{"step":3}})",
       0,
       {"\"__metadata__\" entry 'step' is number, not a string"}},
  };
  for (const CorruptCase& c : cases) {
    SCOPED_TRACE(c.label);
    const std::string file = craft("corrupt.safetensors", c.header, c.data_bytes);
    const Error e = loadError(file);
    EXPECT_EQ(e.kind(), ErrorKind::kFormat);
    EXPECT_TRUE(contains(e.message(), file + ": "));
    for (const std::string& part : c.message_parts) EXPECT_TRUE(contains(e.message(), part));
  }
  // The valid header these were bent from does load.
  EXPECT_NO_THROW(loadSafetensors(craft("ok.safetensors", ok, 8)));
}

// Issue 16, finding 4: a header within its byte limit but nested deep (here 10 MB of '[') is
// refused at the depth bound, before a document of millions of levels is built.
TEST_F(SafetensorsTest, ADeeplyNestedHeaderIsRefusedAtTheDepthBound) {
  constexpr size_t kDepth = 5'000'000;
  const std::string header = "{\"a\":" + std::string(kDepth, '[') + std::string(kDepth, ']') + "}";
  const std::string file = craft("deep.safetensors", header, 0);
  const Error e = loadError(file);
  EXPECT_EQ(e.kind(), ErrorKind::kFormat);
  EXPECT_TRUE(contains(e.message(), file + ": the header nests deeper than 8 levels"));
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  std::printf("peak memory so far: %ld MiB\n", usage.ru_maxrss / 1024);
}

TEST_F(SafetensorsTest, BadFramingIsAFormatError) {
  writeRaw(path("empty"), {});
  Error e = loadError(path("empty"));
  EXPECT_EQ(e.kind(), ErrorKind::kFormat);
  EXPECT_TRUE(contains(e.message(), path("empty") + ": empty file"));

  writeRaw(path("short"), {1, 2, 3, 4, 5});
  e = loadError(path("short"));
  EXPECT_TRUE(contains(e.message(), path("short") + ": truncated: 5 bytes is too short for the "
                                                    "8-byte header length"));

  const std::string header = R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
  e = loadError(craft("past_end", header, 1, header.size() + 2));
  EXPECT_TRUE(contains(e.message(), fmt::format("header length {} runs past the end of the file "
                                                "({} bytes after the 8-byte length)",
                                                header.size() + 2, header.size() + 1)));

  e = loadError(craft("huge", header, 1, uint64_t{1} << 40));
  EXPECT_TRUE(contains(e.message(), "header length 1099511627776 exceeds the limit of 100000000"));

  // Truncating a real file anywhere is caught.
  saveSafetensors(path("real"), everyDType());
  const Bytes real = readRaw(path("real"));
  for (size_t keep : {size_t{7}, size_t{8}, size_t{20}, real.size() - 1}) {
    writeRaw(path("cut"), Bytes(real.begin(), real.begin() + keep));
    e = loadError(path("cut"));
    EXPECT_EQ(e.kind(), ErrorKind::kFormat) << "kept " << keep << ": " << e.message();
  }
}

TEST_F(SafetensorsTest, MissingFileIsAnIoError) {
  Error e = loadError(path("nope.safetensors"));
  EXPECT_EQ(e.kind(), ErrorKind::kIo);
  EXPECT_TRUE(contains(e.message(),
                       "cannot open " + path("nope.safetensors") + ": No such file or directory"));
  e = loadError(dir_.string());
  EXPECT_EQ(e.kind(), ErrorKind::kIo);
  EXPECT_TRUE(contains(e.message(), "is a directory"));
}

// -------------------------------------------------------------------------------------------------
// Independent readers

// Expected output of the readers below for everyDType(): one line per tensor in file order (name,
// dtype, shape, offsets, values), then the metadata.
std::string expectedListing(const std::string& path) {
  const SafetensorsFile loaded = loadSafetensors(path);
  std::vector<std::pair<std::string, const Tensor*>> order;
  for (const auto& [name, tensor] : loaded.tensors) order.emplace_back(name, &tensor);
  // File order: by element size, largest first, then by name (the writer's layout).
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    if (dtypeSize(a.second->dtype()) != dtypeSize(b.second->dtype())) {
      return dtypeSize(a.second->dtype()) > dtypeSize(b.second->dtype());
    }
    return a.first < b.first;
  });
  std::string out;
  uint64_t offset = 0;
  for (const auto& [name, t] : order) {
    std::vector<std::string> dims, values;
    for (int64_t d : t->shape()) dims.push_back(std::to_string(d));
    const uint8_t* p = static_cast<const uint8_t*>(t->raw());
    for (int64_t i = 0; i < t->numel(); ++i) {
      switch (t->dtype()) {
        case DType::kF32:
          values.push_back(fmt::format("{:.9g}", t->data<float>()[i]));
          break;
        case DType::kF64:
          values.push_back(fmt::format("{:.9g}", t->data<double>()[i]));
          break;
        case DType::kI32:
          values.push_back(std::to_string(t->data<int32_t>()[i]));
          break;
        case DType::kI64:
          values.push_back(std::to_string(t->data<int64_t>()[i]));
          break;
        case DType::kU8:
          values.push_back(std::to_string(p[i]));
          break;
        case DType::kBF16: {
          uint16_t bits;
          std::memcpy(&bits, p + 2 * i, 2);
          values.push_back(fmt::format("{:.9g}", bf16ToFloat(bits)));
          break;
        }
        case DType::kF16: {  // decoded by hand: sign, 5-bit exponent, 10-bit mantissa
          uint16_t bits;
          std::memcpy(&bits, p + 2 * i, 2);
          const int exponent = (bits >> 10) & 0x1F, mantissa = bits & 0x3FF;
          double value = exponent == 0 ? std::ldexp(mantissa, -24)
                                       : std::ldexp(1024 + mantissa, exponent - 25);
          if (exponent == 31) value = mantissa ? NAN : INFINITY;
          values.push_back(fmt::format("{:.9g}", (bits & 0x8000) ? -value : value));
          break;
        }
      }
    }
    out += fmt::format("{} {} [{}] {} {} {}\n", name, dtypeName(t->dtype()), fmt::join(dims, ","),
                       offset, offset + t->nbytes(), fmt::join(values, ","));
    offset += t->nbytes();
  }
  for (const auto& [key, value] : loaded.metadata) out += fmt::format("meta {}={}\n", key, value);
  return out;
}

// Parses the file with nothing but json and struct, checking the framing as it goes.
constexpr const char* kJsonStructReader = R"PY(
import json, math, struct, sys
data = open(sys.argv[1], 'rb').read()
(n,) = struct.unpack('<Q', data[:8])
assert n % 8 == 0, 'header length %d is not a multiple of 8' % n
text = data[8:8 + n].decode('utf-8')
assert text == text.rstrip(' ') + ' ' * (len(text) - len(text.rstrip(' '))), 'bad padding'
header = json.loads(text)
meta = header.pop('__metadata__', {})
codes = {'F32': ('f', 4), 'F64': ('d', 8), 'I32': ('i', 4), 'I64': ('q', 8), 'U8': ('B', 1),
         'F16': ('e', 2), 'BF16': (None, 2)}
base, end = 8 + n, 0
def show(v):
    if isinstance(v, float):
        return 'nan' if math.isnan(v) else format(v, '.9g')
    return str(v)
for name, info in sorted(header.items(), key=lambda kv: tuple(kv[1]['data_offsets'])):
    b, e = info['data_offsets']
    assert b == end, 'gap or overlap at %s' % name
    end = e
    code, size = codes[info['dtype']]
    count = math.prod(info['shape'])
    assert (e - b) == count * size, 'size of %s' % name
    raw = data[base + b:base + e]
    if code is None:
        values = [struct.unpack('<f', b'\0\0' + raw[2 * i:2 * i + 2])[0] for i in range(count)]
    else:
        values = list(struct.unpack('<%d%s' % (count, code), raw))
    print(name, info['dtype'], '[%s]' % ','.join(map(str, info['shape'])), b, e,
          ','.join(show(v) for v in values))
assert base + end == len(data), 'data region not fully covered'
for k in sorted(meta):
    print('meta %s=%s' % (k, meta[k]))
)PY";

TEST_F(SafetensorsTest, PythonJsonStructReaderAgrees) {
  if (::access(kPython, X_OK) != 0) GTEST_SKIP() << kPython << " not found";
  const std::string file = path("a.safetensors");
  saveSafetensors(file, everyDType(), {{"format", "pt"}, {"step", "7"}});
  const auto out = runPython(kJsonStructReader, file);
  ASSERT_TRUE(out.has_value()) << python_stderr_;
  EXPECT_EQ(*out, expectedListing(file));
  EXPECT_TRUE(contains(*out, "scalar F32 [] "));
  EXPECT_TRUE(contains(*out, "empty F32 [0,4] "));
}

// Rebuilds each tensor with torch.frombuffer and prints dtype, shape and the sum of its values.
constexpr const char* kTorchReader = R"PY(
import json, struct, sys, torch
data = open(sys.argv[1], 'rb').read()
(n,) = struct.unpack('<Q', data[:8])
header = json.loads(data[8:8 + n])
header.pop('__metadata__', None)
dtypes = {'F32': torch.float32, 'F64': torch.float64, 'I32': torch.int32, 'I64': torch.int64,
          'U8': torch.uint8, 'F16': torch.float16, 'BF16': torch.bfloat16}
for name in sorted(header):
    info = header[name]
    b, e = info['data_offsets']
    dtype = dtypes[info['dtype']]
    if e > b:
        raw = bytearray(data[8 + n + b:8 + n + e])
        t = torch.frombuffer(raw, dtype=dtype).reshape(info['shape'])
    else:
        t = torch.empty(info['shape'], dtype=dtype)
    print(name, str(t.dtype), list(t.shape), format(t.double().sum().item(), '.9g'))
)PY";

// The same listing from our reader, for kTorchReader.
std::string torchListing(const std::string& path) {
  const std::map<DType, std::string> names{
      {DType::kF32, "torch.float32"},  {DType::kF64, "torch.float64"},
      {DType::kI32, "torch.int32"},    {DType::kI64, "torch.int64"},
      {DType::kU8, "torch.uint8"},     {DType::kF16, "torch.float16"},
      {DType::kBF16, "torch.bfloat16"}};
  std::string out;
  for (const auto& [name, t] : loadSafetensors(path).tensors) {
    double sum = 0;
    if (t.dtype() == DType::kF16) {
      for (int64_t i = 0; i < t.numel(); ++i) {
        uint16_t bits;
        std::memcpy(&bits, static_cast<const uint8_t*>(t.raw()) + 2 * i, 2);
        const int exponent = (bits >> 10) & 0x1F, mantissa = bits & 0x3FF;
        const double v =
            exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
        sum += (bits & 0x8000) ? -v : v;
      }
    } else if (t.dtype() == DType::kF64) {
      for (int64_t i = 0; i < t.numel(); ++i) sum += t.data<double>()[i];
    } else if (t.dtype() == DType::kI64) {
      for (int64_t i = 0; i < t.numel(); ++i) sum += static_cast<double>(t.data<int64_t>()[i]);
    } else {
      for (float v : t.toFloatVector()) sum += v;
    }
    std::vector<std::string> dims;
    for (int64_t d : t.shape()) dims.push_back(std::to_string(d));
    out +=
        fmt::format("{} {} [{}] {:.9g}\n", name, names.at(t.dtype()), fmt::join(dims, ", "), sum);
  }
  return out;
}

TEST_F(SafetensorsTest, TorchFrombufferReadsOurFile) {
  if (!pythonHas("torch")) GTEST_SKIP() << "torch is not importable by " << kPython;
  const std::string file = path("t.safetensors");
  // Values torch sums exactly in double, so the listing compares as text.
  Named tensors{{"f32", Tensor::fromVector({0.5f, -2.0f, 3.25f, 8.0f}, {2, 2})},
                {"bf16", Tensor::fromVector({1.5f, -0.25f}, {2}).toDType(DType::kBF16)},
                {"f16", Tensor::empty({2}, DType::kF16)},
                {"f64", Tensor::empty({3}, DType::kF64)},
                {"i32", Tensor::fromInts({7, -9, 100}, {3, 1})},
                {"i64", Tensor::empty({2}, DType::kI64)},
                {"u8", patterned(DType::kU8, {2, 2, 2})},
                {"empty", Tensor::empty({0}, DType::kF32)},
                {"scalar", Tensor::fromVector({4.0f}, {})}};
  const uint16_t f16_bits[2] = {0x3C00, 0xC500};  // 1.0, -5.0
  std::memcpy(tensors[2].second.raw(), f16_bits, 4);
  double* f64 = tensors[3].second.data<double>();
  f64[0] = 0.125, f64[1] = 1e10, f64[2] = -3;
  int64_t* i64 = tensors[5].second.data<int64_t>();
  i64[0] = int64_t{1} << 40, i64[1] = -5;
  saveSafetensors(file, tensors);
  const auto out = runPython(kTorchReader, file);
  ASSERT_TRUE(out.has_value()) << python_stderr_;
  EXPECT_EQ(*out, torchListing(file));
}

TEST_F(SafetensorsTest, SafetensorsPackageLoadsOurFile) {
  if (!pythonHas("safetensors.torch")) {
    GTEST_SKIP() << "the safetensors package (with torch) is not importable by " << kPython
                 << "; pip install safetensors to run this check";
  }
  const std::string file = path("p.safetensors");
  saveSafetensors(file, everyDType(), {{"format", "pt"}});
  const auto out = runPython(R"PY(
import sys
from safetensors import safe_open
with safe_open(sys.argv[1], framework='pt') as f:
    print(sorted(f.metadata().items()))
    for name in sorted(f.keys()):
        t = f.get_tensor(name)
        print(name, str(t.dtype), list(t.shape), format(t.double().sum().item(), '.9g'))
)PY",
                             file);
  ASSERT_TRUE(out.has_value()) << python_stderr_;
  EXPECT_TRUE(contains(*out, "[('format', 'pt')]"));
  EXPECT_TRUE(contains(*out, "scalar torch.float32 [] "));
  EXPECT_TRUE(contains(*out, "empty torch.float32 [0, 4] 0"));
}

}  // namespace
}  // namespace ringmaster
