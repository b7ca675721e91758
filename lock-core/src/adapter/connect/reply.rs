//! Reading the loosely typed replies of admin commands (`CLUSTER SHARDS`,
//! `SENTINEL ...`, `ROLE`) in both protocol versions: RESP2 sends a map as
//! a flat array of alternating names and values, RESP3 as a map.

use redis::Value;

/// The text of a string reply of any kind; `None` for other replies and
/// for bulk strings that are not UTF-8.
pub(crate) fn text(value: &Value) -> Option<&str> {
    match value {
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok(),
        Value::SimpleString(text) | Value::VerbatimString { text, .. } => Some(text),
        Value::Okay => Some("OK"),
        _ => None,
    }
}

/// An integer sent as an integer or as its decimal text.
pub(crate) fn integer(value: &Value) -> Option<i64> {
    match value {
        Value::Int(number) => Some(*number),
        other => text(other)?.parse().ok(),
    }
}

/// The items of an array or set reply.
pub(crate) fn items(value: &Value) -> Option<&[Value]> {
    match value {
        Value::Array(items) | Value::Set(items) => Some(items),
        Value::Attribute { data, .. } => items(data),
        _ => None,
    }
}

/// The name/value pairs of a map reply: a RESP3 map, or a RESP2 array of
/// alternating names and values. `None` if the shape is neither, or a name
/// is not a string.
pub(crate) fn fields(value: &Value) -> Option<Vec<(&str, &Value)>> {
    match value {
        Value::Map(pairs) => pairs
            .iter()
            .map(|(name, value)| Some((text(name)?, value)))
            .collect(),
        Value::Attribute { data, .. } => fields(data),
        other => {
            let items = items(other)?;
            if items.len() % 2 != 0 {
                return None;
            }
            items
                .chunks_exact(2)
                .map(|pair| Some((text(&pair[0])?, &pair[1])))
                .collect()
        }
    }
}

/// The value of field `name`, if present.
pub(crate) fn field<'a>(fields: &[(&str, &'a Value)], name: &str) -> Option<&'a Value> {
    fields
        .iter()
        .find(|(field, _)| field.eq_ignore_ascii_case(name))
        .map(|(_, value)| *value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    #[test]
    fn both_map_shapes_read_the_same() {
        let resp2 = Value::Array(vec![bulk("port"), Value::Int(7000)]);
        let resp3 = Value::Map(vec![(bulk("port"), Value::Int(7000))]);
        for reply in [resp2, resp3] {
            let fields = fields(&reply).expect("a map");
            assert_eq!(field(&fields, "port").and_then(integer), Some(7000));
        }
    }

    #[test]
    fn an_odd_flat_array_is_not_a_map() {
        assert!(fields(&Value::Array(vec![bulk("port")])).is_none());
    }

    #[test]
    fn integers_may_come_as_text() {
        assert_eq!(integer(&bulk("26379")), Some(26379));
        assert_eq!(integer(&bulk("x")), None);
    }
}
