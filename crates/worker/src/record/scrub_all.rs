//! A finished record, scrubbed through: every string in it, whatever field holds it, with the
//! task's secrets and every value the browser stored that the task learned (the last values are
//! learned at the end, after early steps were written down). Image data is left alone: base64
//! holds no typed text.

use serde_json::Value;

use super::FlightRecord;
use crate::secrets::Secrets;

/// `record` with every secret and learned value replaced by its marker.
pub(crate) fn scrubbed(record: FlightRecord, secrets: &Secrets) -> FlightRecord {
    let Ok(mut value) = serde_json::to_value(&record) else {
        return record;
    };
    scrub_value(&mut value, secrets);
    // The walk changes strings only, so the shape still fits; should it not, nothing of the
    // unscrubbed record may leave, so its texts are dropped instead.
    serde_json::from_value(value).unwrap_or_else(|_| emptied(record))
}

fn scrub_value(value: &mut Value, secrets: &Secrets) {
    match value {
        Value::String(text) => {
            if let std::borrow::Cow::Owned(clean) = secrets.scrub(text) {
                *text = clean;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| scrub_value(item, secrets)),
        Value::Object(fields) => {
            for (key, field) in fields.iter_mut() {
                if key != "data" {
                    scrub_value(field, secrets);
                }
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

fn emptied(mut record: FlightRecord) -> FlightRecord {
    record.steps.clear();
    record.turns.clear();
    "[not kept]".clone_into(&mut record.task);
    "[not kept]".clone_into(&mut record.report);
    record.start_url = None;
    record.egress = super::RecordedEgress::default();
    record.downloads.clear();
    record.data = None;
    record
}
