// The ops.h wrappers of the transformer kernels on the host: what their shape and dtype checks
// refuse (with messages naming the shapes), and that the shapes they accept reach the kernel as
// the right sizes and strides (a batched matmul over leading axes equals one matmul per matrix; a
// position table longer than the batch adds its first rows; a causal product skips only masked
// blocks (the full product's values, to rounding); a causal softmax over [B, H, T, T]
// treats every matrix alike). The kernels' values are H1's reference tests' and the CUDA tests'.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/random.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace ringmaster {
namespace {

Tensor randomTensor(const Shape& shape, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> values(static_cast<size_t>(shapeNumel(shape)));
  for (float& v : values) v = static_cast<float>(rng.normal());
  return Tensor::fromVector(values, shape);
}

// Runs `call`, expects a kInvalidArgument error whose message contains `fragment`.
template <typename Call>
void expectRefused(Call call, const std::string& fragment) {
  try {
    call();
    ADD_FAILURE() << "accepted; expected an error containing \"" << fragment << "\"";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
    EXPECT_NE(e.message().find(fragment), std::string::npos) << e.message();
  }
}

TEST(TransformerOps, MatmulBatchedIsOneMatmulPerMatrix) {
  // [2, 3] matrices of [4, 5] x [6, 5]^T -> [4, 6], and the transposed-a variant.
  const Tensor a = randomTensor({2, 3, 4, 5}, 1);
  const Tensor b = randomTensor({2, 3, 6, 5}, 2);
  Tensor c = randomTensor({2, 3, 4, 6}, 3);
  Tensor expected = c.clone();
  ops::matmulBatched(a, false, b, true, c, 0.5f, 2.0f);
  for (int64_t i = 0; i < 6; ++i) {
    const Tensor ai = a.view({6 * 4, 5}).narrowRows(i * 4, 4);
    const Tensor bi = b.view({6 * 6, 5}).narrowRows(i * 6, 6);
    Tensor ci = expected.view({6 * 4, 6}).narrowRows(i * 4, 4);
    ops::matmul(ai, false, bi, true, ci, 0.5f, 2.0f);
  }
  EXPECT_EQ(c.toFloatVector(), expected.toFloatVector());

  const Tensor at = randomTensor({3, 5, 4}, 4);  // op(a) = a^T: [4, 5]
  const Tensor bt = randomTensor({3, 5, 2}, 5);
  Tensor ct = Tensor::zeros({3, 4, 2});
  Tensor expected_t = Tensor::zeros({3, 4, 2});
  ops::matmulBatched(at, true, bt, false, ct);
  for (int64_t i = 0; i < 3; ++i) {
    Tensor ci = expected_t.view({12, 2}).narrowRows(i * 4, 4);
    ops::matmul(at.view({15, 4}).narrowRows(i * 5, 5), true, bt.view({15, 2}).narrowRows(i * 5, 5),
                false, ci);
  }
  EXPECT_EQ(ct.toFloatVector(), expected_t.toFloatVector());
}

TEST(TransformerOps, MatmulBatchedRefusesShapesThatDoNotAgree) {
  Tensor c = Tensor::zeros({2, 4, 6});
  expectRefused(
      [&] {
        ops::matmulBatched(randomTensor({2, 4, 5}, 1), false, randomTensor({2, 4, 6}, 2), false, c);
      },
      "batched matmul shapes [2, 4, 5] x [2, 4, 6] -> [2, 4, 6] do not agree");
  expectRefused(
      [&] {
        ops::matmulBatched(randomTensor({3, 4, 5}, 1), false, randomTensor({3, 5, 6}, 2), false, c);
      },
      "do not agree");  // batch 3 into a batch of 2
  expectRefused(
      [&] {
        ops::matmulBatched(randomTensor({5}, 1), false, randomTensor({5, 6}, 2), false, c);
      },
      "rank 2 or more");
}

// A [batch, T, T] causal matrix as attention has them: random below and on the diagonal, exact
// zeros above.
Tensor causalTensor(int64_t batch, int64_t tokens, uint64_t seed) {
  Tensor t = randomTensor({batch, tokens, tokens}, seed);
  float* v = t.data<float>();
  for (int64_t m = 0; m < batch; ++m)
    for (int64_t i = 0; i < tokens; ++i)
      for (int64_t j = i + 1; j < tokens; ++j) v[(m * tokens + i) * tokens + j] = 0.0f;
  return t;
}

// The largest |got - want| over the entries of [batch, rows, cols] matrices that `wanted` keeps.
template <typename Wanted>
float worstDifference(const Tensor& got, const Tensor& want, int64_t rows, int64_t cols,
                      Wanted wanted) {
  const std::vector<float> g = got.toFloatVector(), w = want.toFloatVector();
  float worst = 0.0f;
  for (size_t at = 0; at < w.size(); ++at) {
    const auto in_matrix = static_cast<int64_t>(at) % (rows * cols);
    if (!wanted(in_matrix / cols, in_matrix % cols)) continue;
    const float difference = std::fabs(g[at] - w[at]);
    worst = std::isnan(difference) ? INFINITY : std::max(worst, difference);
  }
  return worst;
}

// Every transpose mode, token counts around the host's 32-row blocks (1, under, at, over, several
// and a ragged last block) and head widths 1 to 64: the causal product gives matmulBatched's
// values, where the causal matrix is the left operand (every entry of c) and where it is the
// output (every entry on and below the diagonal; c starts as NaN, which beta 0 never reads). To
// rounding, not bit for bit: OpenBLAS picks its kernel by size, and a small block's kernel sums
// the same products in another order. A left-out block that was not zero, or a skipped one that
// was needed, is off by O(1).
TEST(TransformerOps, MatmulBatchedCausalGivesTheFullProductsValues) {
  const int64_t batch = 3;
  uint64_t seed = 100;
  const auto everywhere = [](int64_t, int64_t) { return true; };
  const auto on_and_below_diagonal = [](int64_t i, int64_t j) { return j <= i; };
  for (int64_t tokens : {1, 2, 31, 32, 33, 64, 100, 128, 129})
    for (int64_t width : {1, 7, 64})
      for (bool trans_a : {false, true})
        for (bool trans_b : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "T " << tokens << " D " << width << " trans_a "
                                            << trans_a << " trans_b " << trans_b);
          // The causal left operand: [T, T] x op(b) [T, D].
          const Tensor a = causalTensor(batch, tokens, ++seed);
          const Tensor b = randomTensor(
              trans_b ? Shape{batch, width, tokens} : Shape{batch, tokens, width}, ++seed);
          Tensor full = Tensor::zeros({batch, tokens, width});
          Tensor causal = Tensor::full({batch, tokens, width}, std::nanf(""));
          ops::matmulBatched(a, trans_a, b, trans_b, full);
          ops::matmulBatchedCausal(a, trans_a, b, trans_b, causal, true);
          EXPECT_LE(worstDifference(causal, full, tokens, width, everywhere), 1e-4f) << "causal a";

          // The causal output: op(q) [T, D] x op(k) [D, T].
          const Tensor q = randomTensor(
              trans_a ? Shape{batch, width, tokens} : Shape{batch, tokens, width}, ++seed);
          const Tensor k = randomTensor(
              trans_b ? Shape{batch, tokens, width} : Shape{batch, width, tokens}, ++seed);
          Tensor scores = Tensor::zeros({batch, tokens, tokens});
          Tensor lower = Tensor::full({batch, tokens, tokens}, std::nanf(""));
          ops::matmulBatched(q, trans_a, k, trans_b, scores);
          ops::matmulBatchedCausal(q, trans_a, k, trans_b, lower, false);
          EXPECT_LE(worstDifference(lower, scores, tokens, tokens, on_and_below_diagonal), 1e-4f)
              << "causal output";
        }
}

TEST(TransformerOps, MatmulBatchedCausalRefusesANonSquareCausalMatrix) {
  Tensor c = Tensor::zeros({2, 4, 3});
  expectRefused(
      [&] {
        ops::matmulBatchedCausal(randomTensor({2, 4, 5}, 1), false, randomTensor({2, 5, 3}, 2),
                                 false, c, true);
      },
      "(the a must be square)");
  expectRefused(
      [&] {
        ops::matmulBatchedCausal(randomTensor({2, 4, 5}, 1), false, randomTensor({2, 5, 3}, 2),
                                 false, c, false);
      },
      "(the c must be square)");
  Tensor square = Tensor::zeros({2, 4, 4});
  expectRefused(
      [&] {
        ops::matmulBatchedCausal(ops::cast(causalTensor(2, 4, 3), DType::kBF16), false,
                                 ops::cast(randomTensor({2, 4, 4}, 4), DType::kBF16), false, square,
                                 true);
      },
      "must be F32");
}

TEST(TransformerOps, EmbeddingChecksIdsAndShapes) {
  const Tensor table = randomTensor({5, 3}, 6);
  Tensor out = Tensor::zeros({2, 2, 3});
  const Tensor ids = Tensor::fromInts({4, 0, 2, 4}, {2, 2});
  ops::embeddingForward(ids, table, out);
  const std::vector<float> t = table.toFloatVector(), o = out.toFloatVector();
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t c = 0; c < 3; ++c) {
      EXPECT_EQ(o[i * 3 + c], t[ids.data<int32_t>()[i] * 3 + c]) << "token " << i;
    }
  }
  expectRefused(
      [&] {
        ops::embeddingForward(randomTensor({2, 2}, 7), table, out);
      },
      "token ids must be I32, got F32 [2, 2]");
  expectRefused([&] { ops::embeddingForward(ids, randomTensor({15}, 8), out); },
                "embedding table must be [vocab, dim], got [15]");
  Tensor wrong = Tensor::zeros({2, 2, 4});
  expectRefused([&] { ops::embeddingForward(ids, table, wrong); },
                "embedding of ids [2, 2] from table [5, 3] into [2, 2, 4]");
  Tensor dtable = Tensor::zeros({5, 3});
  expectRefused([&] { ops::embeddingBackward(ids, wrong, dtable); },
                "embedding backward of ids [2, 2] with gradient [2, 2, 4] into [5, 3]");
}

TEST(TransformerOps, PositionRowsUseTheTablesFirstRows) {
  const Tensor pos = randomTensor({7, 3}, 9);  // context 7, a batch of 4 tokens
  Tensor y = Tensor::zeros({2, 4, 3});
  ops::addPositionRows(y, pos);
  const std::vector<float> p = pos.toFloatVector(), yv = y.toFloatVector();
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(yv[b * 12 + i], p[i]);
  }
  // The backward leaves the rows past the batch's tokens alone.
  Tensor dpos = Tensor::zeros({7, 3});
  ops::positionRowsBackward(Tensor::full({2, 4, 3}, 1.5f), dpos);
  const std::vector<float> d = dpos.toFloatVector();
  for (int64_t i = 0; i < 21; ++i) EXPECT_EQ(d[i], i < 12 ? 3.0f : 0.0f) << i;

  expectRefused(
      [&] {
        ops::addPositionRows(y, randomTensor({3, 3}, 10));
      },
      "position rows [3, 3] for activations [2, 4, 3]");
  Tensor narrow_dpos = Tensor::zeros({7, 2});
  expectRefused([&] { ops::positionRowsBackward(y, narrow_dpos); },
                "position gradient [7, 2] for gradient [2, 4, 3]");
}

TEST(TransformerOps, HeadLayoutChecksShapes) {
  Tensor q = Tensor::zeros({2, 3, 4, 5}), k = Tensor::zeros({2, 3, 4, 5}),
         v = Tensor::zeros({2, 3, 4, 5});
  ops::splitQkv(randomTensor({2, 4, 45}, 11), q, k, v);
  expectRefused(
      [&] {
        ops::splitQkv(randomTensor({2, 4, 44}, 11), q, k, v);
      },
      "qkv has shape [2, 4, 44], expected [2, 4, 45]");
  Tensor k_wrong = Tensor::zeros({2, 3, 5, 4});
  expectRefused(
      [&] {
        ops::splitQkv(randomTensor({2, 4, 45}, 11), q, k_wrong, v);
      },
      "k has shape [2, 3, 5, 4], expected [2, 3, 4, 5]");
  Tensor dqkv = Tensor::zeros({2, 4, 30});
  expectRefused([&] { ops::mergeQkv(q, k, v, dqkv); },
                "dqkv has shape [2, 4, 30], expected [2, 4, 45]");
  Tensor y = Tensor::zeros({2, 3, 4, 5});
  expectRefused([&] { ops::permute0213(q, y); },
                "permute0213's output has shape [2, 3, 4, 5], expected [2, 4, 3, 5]");
  // split then merge is the identity
  const Tensor qkv = randomTensor({2, 4, 45}, 12);
  ops::splitQkv(qkv, q, k, v);
  Tensor merged = Tensor::zeros({2, 4, 45});
  ops::mergeQkv(q, k, v, merged);
  EXPECT_EQ(merged.toFloatVector(), qkv.toFloatVector());
}

TEST(TransformerOps, CausalSoftmaxTreatsEveryMatrixAlike) {
  // [2, 3] matrices of [4, 4]: the same scores in each give the same probabilities in each.
  const Tensor one = randomTensor({4, 4}, 13);
  Tensor scores = Tensor::empty({2, 3, 4, 4});
  for (int64_t m = 0; m < 6; ++m) scores.view({24, 4}).narrowRows(m * 4, 4).copyFrom(one);
  Tensor probs = Tensor::empty({2, 3, 4, 4});
  ops::causalSoftmaxForward(scores, probs, 0.5f);
  const std::vector<float> p = probs.toFloatVector();
  for (int64_t m = 1; m < 6; ++m) {
    for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(p[m * 16 + i], p[i]);
  }
  for (int64_t i = 0; i < 4; ++i) {
    float sum = 0.0f;
    for (int64_t j = 0; j < 4; ++j) {
      if (j > i) {
        EXPECT_EQ(p[i * 4 + j], 0.0f) << "above the diagonal at " << i << ", " << j;
      }
      sum += p[i * 4 + j];
    }
    EXPECT_NEAR(sum, 1.0f, 1e-6f) << "row " << i;
  }
  EXPECT_EQ(p[0], 1.0f);  // the first token sees only itself

  Tensor not_square = Tensor::zeros({2, 4, 5});
  expectRefused([&] { ops::causalSoftmaxForward(not_square, not_square, 1.0f); },
                "causal softmax takes square [..., T, T] scores, got [2, 4, 5]");
  Tensor small = Tensor::zeros({2, 3, 3});
  expectRefused([&] { ops::causalSoftmaxForward(scores, small, 1.0f); },
                "causal softmax's probs has shape [2, 3, 3], expected [2, 3, 4, 4]");
  expectRefused([&] { ops::causalSoftmaxBackward(probs, small, probs, 1.0f); },
                "causal softmax's dprobs has shape");
}

}  // namespace
}  // namespace ringmaster
