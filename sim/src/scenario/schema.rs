//! The JSON Schema of scenario files (`sim schema`), for TOML editors
//! (taplo, Even Better TOML) that validate and complete a file from a
//! `#:schema` first line. It is derived from the parser's own raw types
//! (`parse::raw` and `mix::RawMix`), so it has their keys, TOML types and
//! required keys, and refuses unknown keys as they do; the names tables give its enumerations; and each fault kind's
//! and topology kind's parameters come from [`names`](super::names). The
//! parser stays the judge: ranges, durations, targets and how values fit
//! together are checked there, with `file:line:col` errors.

use schemars::generate::SchemaSettings;
use serde_json::{Value, json};

use super::{
    names::{FAULT_KINDS, TOPOLOGY_KINDS, Use},
    parse::raw::RawScenario,
};

/// The JSON Schema (draft-07, which taplo reads) of scenario files.
pub fn json_schema() -> Value {
    let mut settings = SchemaSettings::draft07();
    settings.inline_subschemas = true;
    let mut value = settings
        .into_generator()
        .into_root_schema_for::<RawScenario>()
        .to_value();
    for_toml(&mut value);
    value["title"] = json!("sim scenario file");
    if let Some(fault) = value.pointer_mut("/properties/fault/items") {
        fault["allOf"] = Value::Array(fault_rules());
    }
    if let Some(topology) = value.pointer_mut("/properties/topology") {
        topology["allOf"] = Value::Array(topology_rules());
    }
    value
}

/// Fits schemars' output to TOML and to editors' hovers: TOML has no null
/// (an absent key is what `Option` means here), so the `"null"` schemars
/// adds to each optional key's types goes; and a description's wrapped doc
/// lines join into one.
fn for_toml(value: &mut Value) {
    match value {
        Value::Object(object) => {
            if let Some(Value::Array(types)) = object.get_mut("type") {
                types.retain(|kind| kind != "null");
                if let [only] = types.as_slice() {
                    let only = only.clone();
                    object.insert("type".to_owned(), only);
                }
            }
            if let Some(Value::String(text)) = object.get_mut("description") {
                *text = text.split('\n').collect::<Vec<_>>().join(" ");
            }
            object.values_mut().for_each(for_toml);
        }
        Value::Array(items) => items.iter_mut().for_each(for_toml),
        _ => {}
    }
}

/// Per fault kind (from [`FAULT_KINDS`]): the parameters it requires, and
/// those it never takes.
fn fault_rules() -> Vec<Value> {
    FAULT_KINDS
        .iter()
        .map(|info| {
            let parameters = [
                ("duration", info.duration),
                ("rate", info.rate),
                ("offset", info.offset),
                ("delay", info.delay),
            ];
            let required: Vec<&str> = parameters
                .iter()
                .filter(|(_, use_)| *use_ == Use::Required)
                .map(|(key, _)| *key)
                .collect();
            let never: serde_json::Map<String, Value> = parameters
                .iter()
                .filter(|(_, use_)| *use_ == Use::Never)
                .map(|(key, _)| ((*key).to_owned(), Value::Bool(false)))
                .collect();
            let mut then = json!({ "properties": never });
            if !required.is_empty() {
                then["required"] = json!(required);
            }
            json!({
                "if": { "properties": { "kind": { "const": info.name } } },
                "then": then,
            })
        })
        .collect()
}

/// Per topology kind (from [`TOPOLOGY_KINDS`]): the keys it takes, and no
/// other but `kind`.
fn topology_rules() -> Vec<Value> {
    TOPOLOGY_KINDS
        .iter()
        .map(|(name, keys)| {
            let mut taken: Vec<&str> = vec!["kind"];
            taken.extend(keys.iter());
            json!({
                "if": { "properties": { "kind": { "const": name } } },
                "then": { "propertyNames": { "enum": taken } },
            })
        })
        .collect()
}
