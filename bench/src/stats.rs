//! Order statistics over samples (medians, percentiles).

/// Summary of one set of samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// How many samples there were.
    pub count: usize,
    /// The median (the mean of the two middle samples for an even count).
    pub median: f64,
    /// The 90th percentile, nearest-rank (the smallest sample with at least
    /// 90 % of the samples at or below it).
    pub p90: f64,
    /// The smallest sample.
    pub min: f64,
    /// The largest sample.
    pub max: f64,
    /// The arithmetic mean.
    pub mean: f64,
}

impl Summary {
    /// Summarises `samples`; `None` when there are none (or one is NaN).
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() || samples.iter().any(|s| s.is_nan()) {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Some(Summary {
            count: n,
            median,
            p90: nearest_rank(&sorted, 0.90),
            min: sorted[0],
            max: sorted[n - 1],
            mean: sorted.iter().sum::<f64>() / n as f64,
        })
    }
}

/// The nearest-rank percentile `q` (0 < q ≤ 1) of sorted, non-empty samples.
fn nearest_rank(sorted: &[f64], q: f64) -> f64 {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_and_even_counts() {
        let s = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.mean), (2.0, 1.0, 3.0, 2.0));
        let s = Summary::of(&[4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!(s.median, 2.5);
    }

    #[test]
    fn p90_is_nearest_rank() {
        let samples: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(Summary::of(&samples).unwrap().p90, 9.0);
        let samples: Vec<f64> = (1..=30).map(f64::from).collect();
        assert_eq!(Summary::of(&samples).unwrap().p90, 27.0);
        assert_eq!(Summary::of(&[5.0]).unwrap().p90, 5.0);
    }

    #[test]
    fn empty_and_nan_have_no_summary() {
        assert!(Summary::of(&[]).is_none());
        assert!(Summary::of(&[1.0, f64::NAN]).is_none());
    }
}
