//! Answers a program can use: the caller's JSON Schema, checked once when the task is asked; the
//! tool the worker hands its answer to; and what the worker is told when an answer does not
//! match. The schema is the caller's, so it is bounded before it is compiled, and it is compiled
//! without any way to fetch (`jsonschema` without its `resolve-http`/`resolve-file` features): a
//! `$ref` outside the schema is refused, never followed from the host. Patterns run on the `regex`
//! engine, whose time is linear in the answer, since the worker's model writes what they match.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::ports::ToolDefinition;
use crate::secrets::Secrets;

/// The tool the worker hands a structured answer to.
pub const GIVE_ANSWER: &str = "give_answer";
/// The largest schema accepted, as compact JSON.
pub const MAX_SCHEMA_BYTES: usize = 32 * 1024;
/// The deepest a schema's JSON may nest.
pub const MAX_SCHEMA_DEPTH: usize = 32;
/// The largest answer accepted, as compact JSON (a larger one is sent back as a miss).
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// Answers the worker may hand in (or reports it may write instead) before the task ends
/// without one.
pub const MAX_ANSWER_TRIES: usize = 3;
/// Mismatches listed to the worker per answer.
const MAX_LISTED: usize = 10;
/// Characters of each mismatch's words shown (the library quotes the value, which may be long).
const MAX_MISMATCH_CHARS: usize = 300;

/// A caller's JSON Schema for the task's answer, valid and bounded.
#[derive(Clone)]
pub struct OutputSchema {
    schema: Arc<Value>,
    validator: Arc<jsonschema::Validator>,
}

impl std::fmt::Debug for OutputSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("OutputSchema").field(&self.schema).finish()
    }
}

impl PartialEq for OutputSchema {
    fn eq(&self, other: &Self) -> bool {
        self.schema == other.schema
    }
}

/// Why a schema was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OutputSchemaError {
    /// Too large.
    #[error("output_schema is {bytes} bytes: keep it to {MAX_SCHEMA_BYTES} bytes as compact JSON")]
    TooLarge {
        /// Its size.
        bytes: usize,
    },
    /// Nested too deeply.
    #[error("output_schema nests deeper than {MAX_SCHEMA_DEPTH} levels: flatten it")]
    TooDeep,
    /// Not a JSON object.
    #[error(
        "output_schema must be a JSON Schema object, such as {{\"type\": \"object\", \"properties\": {{…}}}}"
    )]
    NotAnObject,
    /// Not a valid schema, or one that refers outside itself.
    #[error(
        "output_schema is not a JSON Schema Airlock can use: {reason}{at}; fix it and ask again"
    )]
    Invalid {
        /// What the validator said.
        reason: String,
        /// Where in the schema (` at /properties/x`), if anywhere.
        at: String,
    },
}

impl OutputSchema {
    /// Check and compile `schema`.
    pub fn new(schema: Value) -> Result<Self, OutputSchemaError> {
        let bytes = schema.to_string().len();
        if bytes > MAX_SCHEMA_BYTES {
            return Err(OutputSchemaError::TooLarge { bytes });
        }
        if depth(&schema) > MAX_SCHEMA_DEPTH {
            return Err(OutputSchemaError::TooDeep);
        }
        if !schema.is_object() {
            return Err(OutputSchemaError::NotAnObject);
        }
        let invalid = |error: jsonschema::ValidationError<'_>| {
            let path = error.schema_path().to_string();
            OutputSchemaError::Invalid {
                reason: shortened(&error.to_string()),
                at: if path.is_empty() {
                    String::new()
                } else {
                    format!(" at {path}")
                },
            }
        };
        jsonschema::meta::validate(&schema).map_err(invalid)?;
        let validator = jsonschema::options()
            .with_pattern_options(jsonschema::PatternOptions::regex())
            .build(&schema)
            .map_err(invalid)?;
        Ok(Self {
            schema: Arc::new(schema),
            validator: Arc::new(validator),
        })
    }

    /// The schema as the caller gave it.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// The tool the worker answers with. Its input wraps the caller's schema as `data`; the
    /// schema's own definitions move up beside it, so `#/$defs/…` references still resolve in
    /// the model's view (the answer itself is checked against the schema as given).
    pub(crate) fn definition(&self) -> ToolDefinition {
        let mut data = (*self.schema).clone();
        let mut input = json!({
            "type": "object",
            "properties": {
                "report": {
                    "type": "string",
                    "description": "A few sentences for a person: what you found and where (the URLs), and what you could not do or verify."
                }
            },
            "required": ["data", "report"]
        });
        if let (Some(data), Some(input)) = (data.as_object_mut(), input.as_object_mut()) {
            for key in ["$defs", "definitions"] {
                if let Some(defs) = data.remove(key) {
                    input.insert(key.to_owned(), defs);
                }
            }
            data.remove("$schema");
            data.remove("$id");
        }
        input["properties"]["data"] = data;
        ToolDefinition {
            name: GIVE_ANSWER.to_owned(),
            description: "Hand in the task's answer and end the task. `data` must match the \
                          schema exactly; if it does not, you are told which part is wrong and \
                          may hand it in again. Call it alone, once you have found everything."
                .to_owned(),
            input_schema: input,
        }
    }

    /// Check `data`: every mismatch, each with where in the answer it is.
    pub(crate) fn check(&self, data: &Value) -> Result<(), Vec<Mismatch>> {
        let size = data.to_string().len();
        if size > MAX_ANSWER_BYTES {
            return Err(vec![Mismatch {
                at: String::new(),
                what: format!(
                    "the answer is {size} bytes as JSON, more than the {MAX_ANSWER_BYTES} allowed"
                ),
            }]);
        }
        let mismatches: Vec<Mismatch> = self
            .validator
            .iter_errors(data)
            .take(MAX_LISTED)
            .map(|error| Mismatch {
                at: error.instance_path().to_string(),
                what: shortened(&error.to_string()),
            })
            .collect();
        if mismatches.is_empty() {
            Ok(())
        } else {
            Err(mismatches)
        }
    }
}

/// What the worker is told of its answer in the task's first message.
pub(crate) fn instructions() -> String {
    format!(
        "Answer: this task's answer is data for a program. When you have found everything, call \
         {GIVE_ANSWER} with `data` matching the schema in its definition and a short `report` \
         for a person; that ends the task. Whenever you are told to write your report, call \
         {GIVE_ANSWER} instead (it is allowed even after your last step). Put only what you \
         found on the pages into `data`; where the schema lets a value be left out or null and \
         you did not find it, leave it out or null rather than guess."
    )
}

/// One way an answer does not match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mismatch {
    /// Where in the answer (a JSON pointer; empty for the whole answer).
    pub(crate) at: String,
    /// What is wrong.
    pub(crate) what: String,
}

/// What the worker is told of a miss, listing every mismatch with where it is.
pub(crate) fn told(mismatches: &[Mismatch], tries_left: usize) -> String {
    format!(
        "That answer does not match the schema, so the task has not ended:\n{}\nFix these and \
         call {GIVE_ANSWER} again ({tries_left} more {} allowed).",
        listed(mismatches),
        if tries_left == 1 { "try" } else { "tries" }
    )
}

/// One line per mismatch, each naming where in the answer it is.
pub(crate) fn listed(mismatches: &[Mismatch]) -> String {
    let lines: Vec<String> = mismatches
        .iter()
        .map(|m| {
            let at = if m.at.is_empty() { "/" } else { m.at.as_str() };
            format!("- at `data{at}`: {}", m.what)
        })
        .collect();
    lines.join("\n")
}

/// `value` with every secret (and every value the worker must not echo) replaced in its strings,
/// keys included, as the report is.
pub(crate) fn scrubbed(value: &Value, secrets: &Secrets) -> Value {
    match value {
        Value::String(text) => Value::String(secrets.scrub(text).into_owned()),
        Value::Array(items) => Value::Array(items.iter().map(|v| scrubbed(v, secrets)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, v)| (secrets.scrub(key).into_owned(), scrubbed(v, secrets)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn depth(value: &Value) -> usize {
    // Iterative, so a hostile nesting cannot overflow the stack before it is measured (serde_json
    // already stops at 128 levels when parsing; a `Value` built in code has no such bound).
    let mut deepest = 0;
    let mut stack = vec![(value, 1)];
    while let Some((value, level)) = stack.pop() {
        deepest = deepest.max(level);
        match value {
            Value::Array(items) => stack.extend(items.iter().map(|v| (v, level + 1))),
            Value::Object(map) => stack.extend(map.values().map(|v| (v, level + 1))),
            _ => {}
        }
    }
    deepest
}

fn shortened(text: &str) -> String {
    if text.chars().count() <= MAX_MISMATCH_CHARS {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(MAX_MISMATCH_CHARS).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn person() -> OutputSchema {
        OutputSchema::new(json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "hours": {"$ref": "#/$defs/hours"}
            },
            "required": ["name", "hours"],
            "additionalProperties": false,
            "$defs": {"hours": {"type": "array", "items": {"type": "integer", "minimum": 0}}}
        }))
        .unwrap()
    }

    #[test]
    fn a_matching_answer_passes_and_each_mismatch_names_its_path() {
        let schema = person();
        assert_eq!(
            schema.check(&json!({"name": "Ada", "hours": [9, 17]})),
            Ok(())
        );
        let missed = schema
            .check(&json!({"name": 7, "hours": [9, -1], "extra": true}))
            .unwrap_err();
        let at: Vec<&str> = missed.iter().map(|m| m.at.as_str()).collect();
        assert!(at.contains(&"/name"), "{missed:?}");
        assert!(at.contains(&"/hours/1"), "{missed:?}");
        let told = told(&missed, 2);
        assert!(told.contains("at `data/hours/1`"), "{told}");
        assert!(told.contains("2 more tries allowed"), "{told}");
    }

    #[test]
    fn bad_schemas_are_refused_with_the_reason() {
        assert_eq!(
            OutputSchema::new(json!(["type"])).unwrap_err(),
            OutputSchemaError::NotAnObject
        );
        let invalid = OutputSchema::new(json!({"type": "integr"})).unwrap_err();
        assert!(
            matches!(&invalid, OutputSchemaError::Invalid { .. }),
            "{invalid:?}"
        );
        assert!(invalid.to_string().contains("output_schema"), "{invalid}");
        let mut deep = json!({"type": "string"});
        for _ in 0..40 {
            deep = json!({"type": "array", "items": deep});
        }
        assert_eq!(
            OutputSchema::new(deep).unwrap_err(),
            OutputSchemaError::TooDeep
        );
        let wide = json!({"type": "object", "description": "x".repeat(MAX_SCHEMA_BYTES)});
        assert!(matches!(
            OutputSchema::new(wide).unwrap_err(),
            OutputSchemaError::TooLarge { .. }
        ));
    }

    #[test]
    fn a_pattern_that_needs_backtracking_is_refused_when_asked() {
        // The linear engine has no look-arounds or back-references; such a schema is refused
        // then, not run on a backtracking engine.
        for pattern in ["(?=a)b", "(a)\\1"] {
            let refused = OutputSchema::new(json!({"type": "string", "pattern": pattern}));
            assert!(refused.is_err(), "{pattern}");
        }
        assert!(OutputSchema::new(json!({"type": "string", "pattern": "^[a-z]+$"})).is_ok());
    }

    #[test]
    fn a_reference_outside_the_schema_is_refused_not_fetched() {
        // No resolver is built in: compiling fails before anything could be asked of a network.
        for reference in [
            "http://169.254.169.254/latest/meta-data/",
            "file:///etc/passwd",
        ] {
            let refused = OutputSchema::new(json!({"$ref": reference})).unwrap_err();
            assert!(
                matches!(refused, OutputSchemaError::Invalid { .. }),
                "{reference}: {refused:?}"
            );
        }
    }

    #[test]
    fn the_tool_wraps_the_schema_and_keeps_its_references_resolvable() {
        let definition = person().definition();
        assert_eq!(definition.name, GIVE_ANSWER);
        let input = &definition.input_schema;
        assert_eq!(
            input["properties"]["data"]["properties"]["hours"]["$ref"],
            "#/$defs/hours"
        );
        assert_eq!(input["$defs"]["hours"]["type"], "array");
        assert!(input["properties"]["data"].get("$defs").is_none());
        // The wrapper is itself a schema that accepts a matching answer.
        let wrapper = jsonschema::validator_for(input).unwrap();
        assert!(wrapper.is_valid(&json!({"data": {"name": "Ada", "hours": [9]}, "report": "r"})));
        assert!(
            !wrapper.is_valid(&json!({"data": {"name": "Ada", "hours": ["9"]}, "report": "r"}))
        );
    }

    #[test]
    fn an_answer_too_large_is_a_mismatch_not_a_check() {
        let schema = OutputSchema::new(json!({"type": "string"})).unwrap();
        let missed = schema
            .check(&Value::String("x".repeat(MAX_ANSWER_BYTES)))
            .unwrap_err();
        assert!(missed[0].what.contains("bytes as JSON"), "{missed:?}");
    }
}
