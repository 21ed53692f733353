/** Quantiles by rank over a sample (no interpolation: every reported value was measured). */
export const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};

export const stats = (xs: number[]) => ({
  p50: +quantile(xs, 0.5).toFixed(3),
  p99: +quantile(xs, 0.99).toFixed(3),
  mean: +(xs.reduce((a, b) => a + b, 0) / xs.length).toFixed(3),
});
