//! JSON read the way no decoder can read differently.
//!
//! dockerd decodes bodies with Go's `encoding/json`: struct fields match keys without regard to
//! case (with Unicode folds such as `ſ` for `s` and the Kelvin sign for `k`), and of two keys for
//! one field the later wins. A gate that read `"Privileged"` while dockerd read `"privileged"`
//! would pass what it meant to refuse. So every object here is refused if it holds a key with a
//! character outside printable ASCII, or two keys that are equal ignoring ASCII case: then there
//! is exactly one reading, and field lookups ([`field`]) fold case as Go does.

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// The most bytes a body may have; Airlock's create body (with its seccomp profile) is ~13 KB.
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// Read `bytes` as JSON with the rules above.
pub(crate) fn parse(bytes: &[u8]) -> Result<Value, String> {
    if bytes.len() > MAX_BODY_BYTES {
        return Err(format!(
            "the body has {} bytes, over the gate's {MAX_BODY_BYTES}",
            bytes.len()
        ));
    }
    let mut reader = serde_json::Deserializer::from_slice(bytes);
    let value = reader
        .deserialize_any(StrictVisitor)
        .map_err(|error| format!("the body is not JSON the gate reads one way only: {error}"))?;
    reader
        .end()
        .map_err(|error| format!("the body has bytes after its JSON: {error}"))?;
    Ok(value.0)
}

/// The value of struct field `name` in `object`, matched without regard to ASCII case (unique by
/// construction).
pub(crate) fn field<'a>(object: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    object
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case(name))
        .map(|(_, value)| value)
}

/// The keys of `object` that are none of `known` (compared without regard to ASCII case).
pub(crate) fn unknown_keys<'a>(object: &'a Map<String, Value>, known: &[&str]) -> Vec<&'a str> {
    object
        .keys()
        .filter(|key| !known.iter().any(|name| key.eq_ignore_ascii_case(name)))
        .map(String::as_str)
        .collect()
}

struct Strict(Value);

struct StrictVisitor;

impl<'de> de::Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor)
    }
}

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Strict;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("JSON")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Strict, E> {
        Ok(Strict(Value::Bool(value)))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Strict, E> {
        Ok(Strict(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Strict, E> {
        Ok(Strict(value.into()))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Strict, E> {
        serde_json::Number::from_f64(value)
            .map(|number| Strict(Value::Number(number)))
            .ok_or_else(|| E::custom("a number that is not finite"))
    }

    fn visit_str<E>(self, value: &str) -> Result<Strict, E> {
        Ok(Strict(Value::String(value.to_owned())))
    }

    fn visit_string<E>(self, value: String) -> Result<Strict, E> {
        Ok(Strict(Value::String(value)))
    }

    fn visit_unit<E>(self) -> Result<Strict, E> {
        Ok(Strict(Value::Null))
    }

    fn visit_none<E>(self) -> Result<Strict, E> {
        Ok(Strict(Value::Null))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Strict, A::Error> {
        let mut array = Vec::new();
        while let Some(Strict(item)) = items.next_element()? {
            array.push(item);
        }
        Ok(Strict(Value::Array(array)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<Strict, A::Error> {
        let mut object = Map::new();
        while let Some(key) = entries.next_key::<String>()? {
            if !key.bytes().all(|byte| (0x20..0x7f).contains(&byte)) {
                return Err(de::Error::custom(format!(
                    "the key {key:?} has a character outside printable ASCII"
                )));
            }
            if let Some(earlier) = object.keys().find(|seen| seen.eq_ignore_ascii_case(&key)) {
                return Err(de::Error::custom(format!(
                    "the keys {earlier:?} and {key:?} name one field twice"
                )));
            }
            let Strict(value) = entries.next_value()?;
            object.insert(key, value);
        }
        Ok(Strict(Value::Object(object)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_reading_only() {
        assert!(parse(br#"{"Image":"a","HostConfig":{"Init":true}}"#).is_ok());
        for body in [
            &br#"{"Privileged":false,"privileged":true}"#[..],
            br#"{"Privileged":false,"Privileged":true}"#,
            br#"{"HostConfig":{"Binds":[],"BINDS":["/:/host"]}}"#,
            "{\"\u{17f}ecurityOpt\":[]}".as_bytes(),
            "{\"\u{212a}ey\":1}".as_bytes(),
            br#"{"A":1} {"B":2}"#,
            br#"{"A":1"#,
        ] {
            assert!(parse(body).is_err(), "{}", String::from_utf8_lossy(body));
        }
        assert!(parse(&vec![b' '; MAX_BODY_BYTES + 1]).is_err());
    }

    #[test]
    fn fields_fold_case() {
        let Value::Object(object) = parse(br#"{"hostconfig":{"x":1},"Image":"i"}"#).unwrap() else {
            panic!()
        };
        assert!(field(&object, "HostConfig").is_some());
        assert_eq!(unknown_keys(&object, &["Image"]), vec!["hostconfig"]);
    }
}
