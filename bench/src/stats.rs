//! Statistics of one row's samples (median, min, max, ratios) and the verdict
//! of a target. Pure functions: the runner collects samples, the report prints
//! what these compute.

use serde::Serialize;

/// What the table shows for one row.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
}

/// None for no samples. Samples that are not finite numbers are a bug of the
/// caller (a parser let one through), so they are left out rather than
/// poisoning the median.
pub fn summarize(samples: &[f64]) -> Option<Summary> {
    let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some(Summary {
        n,
        median,
        min: v[0],
        max: v[n - 1],
        mean: v.iter().sum::<f64>() / n as f64,
    })
}

/// `value / baseline`, or None when the baseline cannot divide (zero, as the
/// runtime-side memory of runc is, or not a number).
pub fn ratio(value: f64, baseline: f64) -> Option<f64> {
    if !value.is_finite() || !baseline.is_finite() || baseline <= 0.0 {
        return None;
    }
    Some(value / baseline)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Met,
    NotMet,
    /// A figure it needs is missing (a runtime absent or failing here).
    NotEvaluated,
}

impl Verdict {
    pub fn text(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::NotMet => "not met",
            Verdict::NotEvaluated => "not evaluated",
        }
    }
}

/// `value <= factor * reference`. Either figure missing: not evaluated, with why.
pub fn at_most(value: Result<f64, String>, reference: Result<f64, String>, factor: f64) -> (Verdict, Option<String>) {
    match (value, reference) {
        (Ok(v), Ok(r)) if v.is_finite() && r.is_finite() => {
            if v <= factor * r {
                (Verdict::Met, None)
            } else {
                (Verdict::NotMet, None)
            }
        }
        (Err(why), _) | (_, Err(why)) => (Verdict::NotEvaluated, Some(why)),
        _ => (Verdict::NotEvaluated, Some("a figure is not a number".to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_count_is_the_middle() {
        let s = summarize(&[5.0, 1.0, 3.0]).unwrap();
        assert_eq!(s.median, 3.0);
        assert_eq!((s.min, s.max, s.n), (1.0, 5.0, 3));
    }

    #[test]
    fn median_of_even_count_is_the_mean_of_the_two_middle() {
        let s = summarize(&[4.0, 1.0, 3.0, 10.0]).unwrap();
        assert_eq!(s.median, 3.5);
        assert_eq!((s.min, s.max), (1.0, 10.0));
        assert_eq!(s.mean, 4.5);
    }

    #[test]
    fn single_sample_is_its_own_median_min_and_max() {
        let s = summarize(&[2.5]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.5, 2.5, 2.5, 1));
    }

    #[test]
    fn no_samples_give_no_summary_and_non_finite_are_left_out() {
        assert_eq!(summarize(&[]), None);
        assert_eq!(summarize(&[f64::NAN]), None);
        let s = summarize(&[1.0, f64::INFINITY, 3.0]).unwrap();
        assert_eq!((s.n, s.median), (2, 2.0));
    }

    #[test]
    fn ratio_divides_and_refuses_a_zero_baseline() {
        assert_eq!(ratio(3.0, 2.0), Some(1.5));
        assert_eq!(ratio(3.0, 0.0), None);
        assert_eq!(ratio(f64::NAN, 1.0), None);
    }

    #[test]
    fn at_most_compares_with_the_factor() {
        assert_eq!(at_most(Ok(1.10), Ok(1.0), 1.10).0, Verdict::Met);
        assert_eq!(at_most(Ok(1.11), Ok(1.0), 1.10).0, Verdict::NotMet);
        assert_eq!(at_most(Ok(9.0), Ok(100.0), 0.1).0, Verdict::Met);
        assert_eq!(at_most(Ok(11.0), Ok(100.0), 0.1).0, Verdict::NotMet);
    }

    #[test]
    fn at_most_without_a_figure_is_not_evaluated_and_says_why() {
        let (v, why) = at_most(Ok(1.0), Err("crun fails here".into()), 1.0);
        assert_eq!(v, Verdict::NotEvaluated);
        assert_eq!(why.as_deref(), Some("crun fails here"));
        assert_eq!(at_most(Err("x".into()), Ok(1.0), 1.0).0, Verdict::NotEvaluated);
    }
}
