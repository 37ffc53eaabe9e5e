//! When shoppers arrive: a constant rate (`--arrival-rate R`), or a profile of stages
//! (`--arrival-profile 1s:20000,5s:20000,3s:0`) in k6's `ramping-arrival-rate` shape: from 0
//! arrivals a second, each stage moves the rate linearly to its target over its duration
//! (so `1s:20000` ramps to the peak within a second, `5s:20000` holds it, `3s:0` decays).

use std::time::Duration;

use anyhow::{Context, bail};

/// Highest rate a profile may ask for, arrivals a second (beyond it a run is a typo).
const MAX_RATE: f64 = 10_000_000.0;
/// Longest a profile may last.
const MAX_LENGTH: Duration = Duration::from_secs(24 * 3600);

/// One stage: the rate moves linearly to `target` over `duration`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub(crate) struct Stage {
    /// Seconds.
    #[serde(rename = "secs")]
    pub duration: f64,
    /// Arrivals a second at its end.
    pub target: f64,
}

/// The arrival rate over the run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Profile {
    /// Arrivals a second at time 0.
    pub start: f64,
    /// The stages, in order.
    pub stages: Vec<Stage>,
}

impl Profile {
    /// `rate` arrivals a second for `length`.
    pub(crate) fn constant(rate: f64, length: Duration) -> anyhow::Result<Self> {
        check_rate(rate, "--arrival-rate")?;
        if rate <= 0.0 {
            bail!("--arrival-rate must be above 0 (got {rate})");
        }
        let profile = Self {
            start: rate,
            stages: vec![Stage {
                duration: length.as_secs_f64(),
                target: rate,
            }],
        };
        profile.check("--arrival-rate")?;
        Ok(profile)
    }

    /// Parses `DURATION:RATE,…` (durations like `500ms`, `1s`, `2m`; rates per second).
    pub(crate) fn parse(text: &str) -> anyhow::Result<Self> {
        let option = "--arrival-profile";
        let mut stages = Vec::new();
        for (n, part) in text.split(',').enumerate() {
            let part = part.trim();
            let (duration, target) = part.split_once(':').with_context(|| {
                format!("{option}: stage {} `{part}` is not DURATION:RATE", n + 1)
            })?;
            let duration = parse_duration(duration.trim())
                .with_context(|| format!("{option}: stage {} `{part}`", n + 1))?;
            let target: f64 = target.trim().parse().map_err(|_| {
                anyhow::anyhow!(
                    "{option}: stage {} `{part}`: `{target}` is not a rate",
                    n + 1
                )
            })?;
            check_rate(target, option)?;
            stages.push(Stage {
                duration: duration.as_secs_f64(),
                target,
            });
        }
        let profile = Self { start: 0.0, stages };
        profile.check(option)?;
        Ok(profile)
    }

    fn check(&self, option: &str) -> anyhow::Result<()> {
        if self.stages.iter().any(|s| s.duration <= 0.0) {
            bail!("{option}: every stage must last longer than 0");
        }
        if self.length() > MAX_LENGTH {
            bail!("{option}: a profile may last at most {MAX_LENGTH:?}");
        }
        if self.expected() < 1.0 {
            bail!("{option}: the profile makes no arrival (its rates are all 0)");
        }
        Ok(())
    }

    /// How long the arrivals last.
    pub(crate) fn length(&self) -> Duration {
        Duration::from_secs_f64(self.stages.iter().map(|s| s.duration).sum())
    }

    /// Arrivals the profile makes in all (the area under the rate).
    pub(crate) fn expected(&self) -> f64 {
        let mut from = self.start;
        let mut total = 0.0;
        for s in &self.stages {
            total += (from + s.target) / 2.0 * s.duration;
            from = s.target;
        }
        total
    }

    /// The highest rate it reaches.
    pub(crate) fn peak(&self) -> f64 {
        self.stages
            .iter()
            .map(|s| s.target)
            .fold(self.start, f64::max)
    }

    /// The intended start of every arrival, in order, from the start of the load.
    pub(crate) fn schedule(&self) -> Schedule<'_> {
        Schedule {
            profile: self,
            stage: 0,
            stage_start: 0.0,
            from: self.start,
            next_area: 0.0,
        }
    }
}

fn check_rate(rate: f64, option: &str) -> anyhow::Result<()> {
    if !rate.is_finite() || rate < 0.0 {
        bail!("{option}: a rate must be a number of arrivals a second, 0 or more (got {rate})");
    }
    if rate > MAX_RATE {
        bail!("{option}: {rate} arrivals a second is above the most this tool makes ({MAX_RATE})");
    }
    Ok(())
}

fn parse_duration(text: &str) -> anyhow::Result<Duration> {
    let (number, unit) = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map_or((text, ""), |i| text.split_at(i));
    let value: f64 = number
        .parse()
        .map_err(|_| anyhow::anyhow!("`{text}` is not a duration (e.g. 500ms, 1s, 2m)"))?;
    let secs = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        _ => bail!("`{text}` is not a duration (e.g. 500ms, 1s, 2m): unit ms, s or m"),
    };
    if !secs.is_finite() || secs <= 0.0 {
        bail!("`{text}` must last longer than 0");
    }
    Ok(Duration::from_secs_f64(secs))
}

/// The arrivals' intended starts: the n-th arrival (from 0) comes when the area under the
/// rate reaches n, so a constant rate R spaces them 1/R apart, and a ramp tightens them.
pub(crate) struct Schedule<'a> {
    profile: &'a Profile,
    stage: usize,
    /// When the current stage began, seconds.
    stage_start: f64,
    /// The rate the current stage starts from.
    from: f64,
    /// Area (from the stage's start) at which the next arrival comes.
    next_area: f64,
}

impl Iterator for Schedule<'_> {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        loop {
            let stage = self.profile.stages.get(self.stage)?;
            let (r0, r1, len) = (self.from, stage.target, stage.duration);
            let slope = (r1 - r0) / len;
            let need = self.next_area;
            // Time t into the stage where r0·t + slope·t²/2 = need.
            let t = if slope.abs() < 1e-12 {
                (r0 > 0.0).then(|| need / r0)
            } else {
                let disc = r0 * r0 + 2.0 * slope * need;
                (disc >= 0.0).then(|| (disc.sqrt() - r0) / slope)
            };
            match t {
                Some(t) if t <= len && t >= 0.0 => {
                    self.next_area = need + 1.0;
                    return Some(Duration::from_secs_f64(self.stage_start + t));
                }
                _ => {
                    // Not in this stage: carry what is still needed into the next one.
                    let area = (r0 + r1) / 2.0 * len;
                    self.next_area = need - area;
                    self.stage_start += len;
                    self.from = r1;
                    self.stage += 1;
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_constant_rate_spaces_arrivals_evenly() {
        let p = Profile::constant(1000.0, Duration::from_secs(2)).unwrap();
        let times: Vec<Duration> = p.schedule().collect();
        assert_eq!(times.len(), 2001, "0, 1 ms, …, 2000 ms");
        assert_eq!(times[1], Duration::from_millis(1));
        assert!((times[1500].as_secs_f64() - 1.5).abs() < 1e-9);
    }

    #[test]
    fn a_ramp_hold_and_decay_make_the_area_under_the_rate() {
        let p = Profile::parse("1s:20000, 5s:20000, 3s:0").unwrap();
        assert_eq!(p.length(), Duration::from_secs(9));
        assert_eq!(p.peak(), 20_000.0);
        let expected = 10_000.0 + 100_000.0 + 30_000.0;
        assert_eq!(p.expected(), expected);
        let times: Vec<Duration> = p.schedule().collect();
        assert!(
            (times.len() as f64 - expected).abs() <= 2.0,
            "{}",
            times.len()
        );
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "in order");
        // Half the ramp's arrivals come in its last 0.29 s (the rate grows linearly).
        let ramp_half = times
            .iter()
            .filter(|t| t.as_secs_f64() < std::f64::consts::FRAC_1_SQRT_2)
            .count();
        assert!((ramp_half as f64 - 5_000.0).abs() < 5.0, "{ramp_half}");
        let first_second = times.iter().filter(|t| t.as_secs_f64() < 1.0).count();
        assert!(
            (first_second as f64 - 10_000.0).abs() < 3.0,
            "{first_second}"
        );
    }

    #[test]
    fn bad_profiles_name_the_option_and_the_stage() {
        for (text, says) in [
            ("", "stage 1"),
            ("1s", "DURATION:RATE"),
            ("1x:100", "unit ms, s or m"),
            ("1s:fast", "not a rate"),
            ("1s:-5", "0 or more"),
            ("0s:100", "longer than 0"),
            ("1s:0,2s:0", "no arrival"),
            ("1s:1e12", "above the most"),
        ] {
            let err = format!("{:#}", Profile::parse(text).unwrap_err());
            assert!(err.contains("--arrival-profile"), "{text}: {err}");
            assert!(err.contains(says), "{text}: {err}");
        }
        let err = Profile::constant(0.0, Duration::from_secs(1)).unwrap_err();
        assert!(format!("{err:#}").contains("--arrival-rate"), "{err:#}");
    }
}
