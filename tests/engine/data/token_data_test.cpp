// Token data: llm.c shards written here (uint16 and uint32) read back as exact windows and
// targets, one test per way a shard can be broken (each error names the file), byte-level text
// split into training and validation parts, and the DistributedSampler over token windows.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <set>

#include "core/error.h"
#include "data/distributed_sampler.h"
#include "data/text_dataset.h"
#include "data/token_shards.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using Tokens = std::vector<uint32_t>;

class TokenDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ringmaster_tokens_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // tokens[i] = (start + i * 7) % modulo.
  static Tokens sequence(size_t count, uint32_t start, uint32_t modulo) {
    Tokens tokens(count);
    for (size_t i = 0; i < count; ++i) tokens[i] = (start + static_cast<uint32_t>(i) * 7) % modulo;
    return tokens;
  }

  static std::vector<uint8_t> readRaw(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  static void writeRaw(const std::string& file, const std::vector<uint8_t>& bytes) {
    std::ofstream out(file, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
  // Overwrites header int32 `slot` of a shard.
  static void patchHeader(const std::string& file, int slot, int32_t value) {
    std::vector<uint8_t> bytes = readRaw(file);
    std::memcpy(&bytes[static_cast<size_t>(slot) * 4], &value, 4);
    writeRaw(file, bytes);
  }

  // The error opening `pattern` must raise.
  static Error openError(const std::string& pattern, int64_t context, int64_t vocab) {
    try {
      TokenShardDataset::open(pattern, context, vocab, "data.train");
    } catch (const Error& e) {
      return e;
    }
    ADD_FAILURE() << "opening " << pattern << " did not fail";
    return Error(ErrorKind::kInternal, "", "", 0);
  }

  // Every sample of `dataset`, filled at once: inputs and targets [size, context].
  static std::pair<std::vector<int32_t>, std::vector<int32_t>> fillAll(const Dataset& dataset) {
    std::vector<int64_t> indices(static_cast<size_t>(dataset.size()));
    std::iota(indices.begin(), indices.end(), 0);
    const auto n = static_cast<size_t>(dataset.size() * dataset.inputShape()[0]);
    std::vector<int32_t> inputs(n), targets(n);
    dataset.fill(indices, inputs.data(), targets.data());
    return {inputs, targets};
  }

  fs::path dir_;
};

TEST_F(TokenDataTest, WindowsAndTargetsAreExactInBothWidths) {
  // Shard a (uint16): 23 tokens -> (23 - 1) / 5 = 4 windows; shard b (uint32, ids above 65535):
  // 11 tokens -> 2 windows. Windows start at multiples of 5 and never cross into the next shard.
  const Tokens a = sequence(23, 3, 50000);
  const Tokens b = sequence(11, 70000, 100000);
  writeTokenShard(path("s_000.bin"), a);
  writeTokenShard(path("s_001.bin"), b, /*wide=*/true);
  auto dataset = TokenShardDataset::open(path("s_*.bin"), 5, 100000, "data.train");
  ASSERT_EQ(dataset->files().size(), 2u);
  EXPECT_EQ(dataset->size(), 6);
  EXPECT_EQ(dataset->tokenCount(), 34);
  EXPECT_EQ(dataset->inputShape(), (Shape{5}));
  EXPECT_EQ(dataset->targetShape(), (Shape{5}));
  EXPECT_EQ(dataset->inputDType(), DType::kI32);
  EXPECT_EQ(dataset->targetDType(), DType::kI32);
  const auto [inputs, targets] = fillAll(*dataset);
  for (int64_t s = 0; s < 6; ++s) {
    const Tokens& shard = s < 4 ? a : b;
    const int64_t first = (s < 4 ? s : s - 4) * 5;
    for (int64_t t = 0; t < 5; ++t) {
      EXPECT_EQ(inputs[s * 5 + t], static_cast<int32_t>(shard[first + t])) << s << "," << t;
      EXPECT_EQ(targets[s * 5 + t], static_cast<int32_t>(shard[first + t + 1])) << s << "," << t;
    }
  }
  // A batch in any order is the same windows.
  const std::vector<int64_t> order = {5, 0, 3};
  std::vector<int32_t> in(15), target(15);
  dataset->fill(order, in.data(), target.data());
  for (size_t k = 0; k < order.size(); ++k) {
    for (int64_t t = 0; t < 5; ++t) {
      EXPECT_EQ(in[k * 5 + t], inputs[order[k] * 5 + t]);
      EXPECT_EQ(target[k * 5 + t], targets[order[k] * 5 + t]);
    }
  }
}

TEST_F(TokenDataTest, ShardsAreTakenInSortedOrderAndTheLastTokenIsATarget) {
  writeTokenShard(path("b.bin"), Tokens{9, 8, 7});
  writeTokenShard(path("a.bin"), Tokens{1, 2, 3});
  auto dataset = TokenShardDataset::open(path("*.bin"), 2, 10, "data.train");
  EXPECT_EQ(dataset->files(), (std::vector<std::string>{path("a.bin"), path("b.bin")}));
  const auto [inputs, targets] = fillAll(*dataset);
  EXPECT_EQ(inputs, (std::vector<int32_t>{1, 2, 9, 8}));
  EXPECT_EQ(targets, (std::vector<int32_t>{2, 3, 8, 7}));
}

TEST_F(TokenDataTest, AGlobMatchingNothingIsAnIoError) {
  const Error e = openError(path("none_*.bin"), 4, 100);
  EXPECT_EQ(e.kind(), ErrorKind::kIo);
  EXPECT_NE(e.message().find("data.train: nothing matches"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("none_*.bin"), std::string::npos) << e.message();
}

TEST_F(TokenDataTest, EveryMalformedShardIsAFormatErrorNamingTheFile) {
  struct Case {
    std::string name;
    std::function<void(const std::string&)> corrupt;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"magic", [](const std::string& f) { patchHeader(f, 0, 20240521); }, "magic 20240521"},
      {"version", [](const std::string& f) { patchHeader(f, 1, 2); }, "version 2, expected 1"},
      {"truncated", [](const std::string& f) { patchHeader(f, 2, 41); },
       "truncated: its header says 41 tokens"},
      {"oversized", [](const std::string& f) { patchHeader(f, 2, 39); }, "2 bytes after the 39"},
      {"negative", [](const std::string& f) { patchHeader(f, 2, -1); }, "negative token count"},
      {"header", [](const std::string& f) { writeRaw(f, std::vector<uint8_t>(100, 0)); },
       "shorter than its 1024-byte header"},
      {"empty", [](const std::string& f) { writeRaw(f, {}); }, "0 bytes"},
      {"short",
       [](const std::string& f) {
         writeTokenShard(f, Tokens{1, 2, 3, 4});
       },
       "4 tokens, fewer than one window of model.context + 1 = 5"},
      {"token", [](const std::string& f) { writeTokenShard(f, sequence(40, 0, 100)); },
       "has token 91 at position 13, outside model.vocab_size 90"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    writeTokenShard(path("good.bin"), sequence(40, 0, 50));
    const std::string bad = path(c.name + ".bin");
    writeTokenShard(bad, sequence(40, 0, 50));
    c.corrupt(bad);
    const Error e = openError(path("*.bin"), 4, 90);
    EXPECT_EQ(e.kind(), ErrorKind::kFormat);
    EXPECT_NE(e.message().find(bad), std::string::npos) << e.message();
    EXPECT_NE(e.message().find(c.expected), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("data.train"), std::string::npos) << e.message();
    fs::remove(bad);
  }
  // The good shard alone opens.
  EXPECT_EQ(TokenShardDataset::open(path("*.bin"), 4, 90, "data.train")->size(), 9);
}

TEST_F(TokenDataTest, WriterRejectsTokensTooWideForUint16) {
  EXPECT_THROW(writeTokenShard(path("x.bin"), Tokens{1, 65536}), Error);
  writeTokenShard(path("x.bin"), Tokens{1, 65536}, /*wide=*/true);
  auto dataset = TokenShardDataset::open(path("x.bin"), 1, 65537, "data.val");
  const auto [inputs, targets] = fillAll(*dataset);
  EXPECT_EQ(inputs, (std::vector<int32_t>{1}));
  EXPECT_EQ(targets, (std::vector<int32_t>{65536}));
}

TEST_F(TokenDataTest, TextSplitsIntoTrainingAndValidationBytes) {
  // 40 bytes, val_fraction 0.25: training [0, 30), validation [30, 40).
  std::vector<uint8_t> text(40);
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<uint8_t>(200 + i);  // > 127
  writeRaw(path("t.txt"), text);
  auto train = ByteTextDataset::load(path("t.txt"), 4, 256, 0.25, TextSplit::kTrain);
  auto val = ByteTextDataset::load(path("t.txt"), 4, 300, 0.25, TextSplit::kValidation);
  EXPECT_EQ(train->bytes(), std::vector<uint8_t>(text.begin(), text.begin() + 30));
  EXPECT_EQ(val->bytes(), std::vector<uint8_t>(text.begin() + 30, text.end()));
  EXPECT_EQ(train->size(), 7);  // (30 - 1) / 4
  EXPECT_EQ(val->size(), 2);    // (10 - 1) / 4
  const auto [inputs, targets] = fillAll(*val);
  for (int64_t s = 0; s < 2; ++s) {
    for (int64_t t = 0; t < 4; ++t) {
      EXPECT_EQ(inputs[s * 4 + t], 230 + s * 4 + t);
      EXPECT_EQ(targets[s * 4 + t], 231 + s * 4 + t);
    }
  }
}

TEST_F(TokenDataTest, TextErrorsNameTheFileOrTheField) {
  auto error = [&](const std::string& file, int64_t context, int64_t vocab, double fraction,
                   TextSplit split) {
    try {
      ByteTextDataset::load(file, context, vocab, fraction, split);
    } catch (const Error& e) {
      return e;
    }
    ADD_FAILURE() << "loading " << file << " did not fail";
    return Error(ErrorKind::kInternal, "", "", 0);
  };
  const Error missing = error(path("missing.txt"), 4, 256, 0.1, TextSplit::kTrain);
  EXPECT_EQ(missing.kind(), ErrorKind::kIo);
  EXPECT_NE(missing.message().find(path("missing.txt")), std::string::npos) << missing.message();

  writeRaw(path("t.txt"), std::vector<uint8_t>(40, 'a'));
  // The validation part (4 bytes at 0.1) is too short for a window of 5.
  const Error short_val = error(path("t.txt"), 4, 256, 0.1, TextSplit::kValidation);
  EXPECT_EQ(short_val.kind(), ErrorKind::kFormat);
  EXPECT_NE(short_val.message().find("validation part (4 bytes"), std::string::npos)
      << short_val.message();
  EXPECT_NE(short_val.message().find(path("t.txt")), std::string::npos);
  // The training part (4 bytes at 0.9) likewise.
  const Error short_train = error(path("t.txt"), 4, 256, 0.9, TextSplit::kTrain);
  EXPECT_NE(short_train.message().find("training part (4 bytes"), std::string::npos)
      << short_train.message();
  const Error vocab = error(path("t.txt"), 4, 255, 0.1, TextSplit::kTrain);
  EXPECT_EQ(vocab.kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(vocab.message().find("model.vocab_size must be at least 256"), std::string::npos);
}

TEST_F(TokenDataTest, RanksSplitTokenWindowsDisjointlyAndResume) {
  // 61 windows of 3 tokens; every window's first input token is 3 * index (unique), so a sample
  // seen by two ranks would show as a repeated first token.
  Tokens tokens(184);
  std::iota(tokens.begin(), tokens.end(), 0u);
  writeTokenShard(path("s.bin"), tokens);
  auto dataset = TokenShardDataset::open(path("s.bin"), 3, 1000, "data.train");
  ASSERT_EQ(dataset->size(), 61);
  for (int world = 1; world <= 4; ++world) {
    SCOPED_TRACE(world);
    std::set<int32_t> seen;
    for (int rank = 0; rank < world; ++rank) {
      DistributedSampler sampler(dataset->size(), world, rank, /*shuffle=*/true, /*seed=*/7,
                                 /*drop_last=*/true);
      sampler.setEpoch(2);
      const std::vector<int64_t> indices = sampler.indices();
      EXPECT_EQ(static_cast<int64_t>(indices.size()), 61 / world);
      std::vector<int32_t> inputs(indices.size() * 3), targets(indices.size() * 3);
      dataset->fill(indices, inputs.data(), targets.data());
      for (size_t k = 0; k < indices.size(); ++k) {
        EXPECT_EQ(inputs[k * 3], 3 * indices[k]);
        EXPECT_EQ(targets[k * 3 + 2], 3 * indices[k] + 3);
        EXPECT_TRUE(seen.insert(inputs[k * 3]).second) << "window " << indices[k] << " twice";
      }
      // Resuming at batch 5 gives the batches an uninterrupted iterator gives from there.
      BatchIterator walked(sampler, 4), resumed(sampler, 4);
      for (int b = 0; b < 5; ++b) walked.next();
      resumed.seek(5);
      for (int b = 0; b < 20; ++b) EXPECT_EQ(walked.next(), resumed.next());
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), (61 / world) * world);
  }
}

}  // namespace
}  // namespace ringmaster
