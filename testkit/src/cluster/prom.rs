//! Reads figures out of Prometheus text exposition, for tests.

/// Sum of every sample of `name` whose labels include all of `labels`
/// (0 when there is none).
pub fn sum(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (metric, label_text) = match series.split_once('{') {
                Some((m, rest)) => (m, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            if metric != name {
                return None;
            }
            let all = labels
                .iter()
                .all(|(k, v)| label_text.contains(&format!("{k}=\"{v}\"")));
            if !all {
                return None;
            }
            value.parse::<f64>().ok()
        })
        .sum()
}

/// Names of every metric with at least one sample in `text`.
pub fn names(text: &str) -> std::collections::BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let end = l.find(['{', ' '])?;
            Some(l[..end].to_string())
        })
        .collect()
}
