// TensorBoard's scalar smoothing for the charts, the same rule as the desktop's
// (ui/widgets/smoothing.h): an exponential moving average debiased like Adam's moments, so the
// first points are not pulled towards zero. It smooths the points it is given (the buckets drawn),
// not the stored series; no DOM, so node tests it on its own (tests/web/js/).

// Smoothing weight w in [0, 1): for the t-th finite value v_t (t = 0, 1, ...),
//   ema_t = w * ema_{t-1} + (1 - w) * v_t, ema_{-1} = 0,   smoothed_t = ema_t / (1 - w^(t+1)).
// A null (no point in that bucket), NaN or infinite value is passed through unchanged and neither
// counted nor folded into the average; a series whose values are all equal is returned as it is.
export function smoothEma(values, weight) {
  const out = Array.from(values);
  if (!(weight > 0) || out.length === 0) return out;
  const finite = (v) => typeof v === 'number' && Number.isFinite(v);
  if (out.every((v) => v === out[0])) return out;
  let ema = 0;
  let decay = 1; // w^(t+1), the weight the zero start still has
  for (let i = 0; i < out.length; i += 1) {
    const v = out[i];
    if (!finite(v)) continue;
    ema = ema * weight + (1 - weight) * v;
    decay *= weight;
    out[i] = weight >= 1 ? ema : ema / (1 - decay);
  }
  return out;
}
