//! A Go CPU profile (pprof's gzip-compressed protocol buffer, as `runsc --profile-cpu` writes it)
//! read into its samples: each one's CPU time and call stack as function names, outermost first.
//! Only the fields this needs are declared; prost skips the rest.

use std::io::Read as _;

use anyhow::Context as _;
use prost::Message as _;

/// One sampled stack and the CPU time charged to it.
pub(super) struct Sample {
    pub nanos: i64,
    /// Function names, the outermost caller first.
    pub stack: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Profile {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    sample: Vec<RawSample>,
    #[prost(message, repeated, tag = "4")]
    location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    string_table: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ValueType {
    #[prost(int64, tag = "1")]
    kind: i64,
    #[prost(int64, tag = "2")]
    unit: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct RawSample {
    #[prost(uint64, repeated, tag = "1")]
    location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    value: Vec<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Location {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(message, repeated, tag = "4")]
    line: Vec<Line>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Line {
    #[prost(uint64, tag = "1")]
    function_id: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Function {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "2")]
    name: i64,
}

/// The samples of a CPU profile: the value whose type is `cpu` (in nanoseconds).
pub(super) fn cpu_samples(gzipped: &[u8]) -> anyhow::Result<Vec<Sample>> {
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(gzipped)
        .read_to_end(&mut bytes)
        .context("the profile is not gzip-compressed")?;
    let profile = Profile::decode(bytes.as_slice()).context("the profile is not pprof's format")?;
    let text = |index: i64| {
        usize::try_from(index)
            .ok()
            .and_then(|i| profile.string_table.get(i))
            .map_or("?", String::as_str)
    };
    let cpu = profile
        .sample_type
        .iter()
        .position(|kind| text(kind.kind) == "cpu" && text(kind.unit) == "nanoseconds")
        .context("the profile has no CPU time in nanoseconds")?;
    let functions: std::collections::HashMap<u64, &str> = profile
        .function
        .iter()
        .map(|function| (function.id, text(function.name)))
        .collect();
    let locations: std::collections::HashMap<u64, Vec<&str>> = profile
        .location
        .iter()
        .map(|location| {
            // A location's lines run from the inlined callee out to its caller.
            let names = location
                .line
                .iter()
                .map(|line| functions.get(&line.function_id).copied().unwrap_or("?"))
                .collect();
            (location.id, names)
        })
        .collect();
    Ok(profile
        .sample
        .iter()
        .map(|sample| {
            // A sample's locations run from the leaf out to the root; the stack is kept root first.
            let mut stack: Vec<String> = sample
                .location_id
                .iter()
                .flat_map(|id| locations.get(id).into_iter().flatten())
                .map(|name| (*name).to_owned())
                .collect();
            stack.reverse();
            Sample {
                nanos: sample.value.get(cpu).copied().unwrap_or(0),
                stack,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn a_sample_becomes_its_cpu_time_and_its_stack_root_first() {
        let strings = [
            "",
            "samples",
            "count",
            "cpu",
            "nanoseconds",
            "main",
            "leaf",
            "inlined",
        ];
        let profile = Profile {
            sample_type: vec![
                ValueType { kind: 1, unit: 2 },
                ValueType { kind: 3, unit: 4 },
            ],
            sample: vec![RawSample {
                location_id: vec![2, 1],
                value: vec![1, 10_000_000],
            }],
            location: vec![
                Location {
                    id: 1,
                    line: vec![Line { function_id: 5 }],
                },
                Location {
                    id: 2,
                    line: vec![Line { function_id: 7 }, Line { function_id: 6 }],
                },
            ],
            function: vec![
                Function { id: 5, name: 5 },
                Function { id: 6, name: 6 },
                Function { id: 7, name: 7 },
            ],
            string_table: strings.iter().map(|s| (*s).to_owned()).collect(),
        };
        let samples = cpu_samples(&gzip(&profile.encode_to_vec())).unwrap();
        assert_eq!(samples.len(), 1);
        assert_eq!(samples[0].nanos, 10_000_000);
        assert_eq!(samples[0].stack, ["main", "leaf", "inlined"]);
    }

    #[test]
    fn what_is_not_a_cpu_profile_is_refused_with_the_reason() {
        let error = cpu_samples(b"not gzip").err().unwrap().to_string();
        assert!(error.contains("gzip"), "{error}");
        let no_cpu = Profile {
            string_table: vec![String::new()],
            ..Profile::default()
        };
        let error = cpu_samples(&gzip(&no_cpu.encode_to_vec()))
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("no CPU time"), "{error}");
    }
}
