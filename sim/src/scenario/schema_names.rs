//! The names tables as JSON Schema enumerations: the types the raw scenario
//! types (`parse::raw`, `mix::RawMix`) name for their string keys, so the
//! schema (`schema`) lists every accepted name. Kept apart from `schema`,
//! which reads the raw types, so neither depends on the other in a circle.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

use super::names::{
    EXPECTS, FAULT_KINDS, FENCINGS, FLAVOURS, PERSISTENCES, PROPERTIES, TOPOLOGY_KINDS,
    WORKLOAD_KINDS,
};

/// A string that must be one of a names table's names.
macro_rules! name_schema {
    ($marker:ident, $names:expr) => {
        #[doc = concat!("A name from `", stringify!($names), "`, in the schema.")]
        pub(crate) struct $marker;

        impl JsonSchema for $marker {
            fn inline_schema() -> bool {
                true
            }

            fn schema_name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($marker))
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                let names: Vec<&str> = $names.iter().map(|row| row.0).collect();
                json_schema!({ "type": "string", "enum": names })
            }
        }
    };
}

name_schema!(ExpectName, EXPECTS);
name_schema!(PropertyName, PROPERTIES);
name_schema!(TopologyKindName, TOPOLOGY_KINDS);
name_schema!(FlavourName, FLAVOURS);
name_schema!(PersistenceName, PERSISTENCES);
name_schema!(FencingName, FENCINGS);
name_schema!(WorkloadKindName, WORKLOAD_KINDS);

/// A fault kind's name, in the schema.
pub(crate) struct FaultKindName;

impl JsonSchema for FaultKindName {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("FaultKindName")
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let names: Vec<&str> = FAULT_KINDS.iter().map(|info| info.name).collect();
        json_schema!({ "type": "string", "enum": names })
    }
}
