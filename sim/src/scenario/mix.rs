//! The `[mix]` table of a scenario file: a fault mix each seed draws
//! (swarm testing), read and written back.

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

use super::{
    names::{FAULT_KINDS, kind_name},
    schema_names::FaultKindName,
    text::{Locator, ScenarioError, duration_text, quoted},
};
use crate::config::{LockConfig, MixSpec, ServerConfig, Topology};

/// A fault mix: each seed draws its own subset and rates of these kinds.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMix {
    /// The fault kinds to draw from (each must apply to the topology).
    #[schemars(with = "Vec<FaultKindName>")]
    kinds: Vec<Spanned<String>>,
    /// Episodes per seed: a count ("6") or a range ("4..12"), 1 to 1000.
    #[schemars(with = "String")]
    episodes: Spanned<String>,
    /// The largest clock-drift rate, between 0 and 0.5.
    #[schemars(with = "Option<f64>")]
    drift: Option<Spanned<f64>>,
    /// The largest clock jump (a duration: "2s").
    #[schemars(with = "Option<String>")]
    jump: Option<Spanned<String>>,
    /// The chance (0 to 1) that an episode is a pair.
    #[schemars(with = "Option<f64>")]
    pairs: Option<Spanned<f64>>,
}

/// Checks a `[mix]` table against the topology and the lock.
pub(super) fn parse(
    locator: &Locator<'_>,
    spanned: &Spanned<RawMix>,
    topology: &Topology,
    server: &ServerConfig,
    lock: &LockConfig,
) -> Result<MixSpec, ScenarioError> {
    let raw = spanned.get_ref();
    let mut kinds = Vec::new();
    for name in &raw.kinds {
        let Some(info) = FAULT_KINDS.iter().find(|info| info.name == name.get_ref()) else {
            let names: Vec<&str> = FAULT_KINDS.iter().map(|info| info.name).collect();
            return Err(locator.error(
                name.span(),
                format!(
                    "unknown fault kind {:?}; expected one of: {}",
                    name.get_ref(),
                    names.join(", ")
                ),
            ));
        };
        if !(info.applies)(topology) {
            return Err(locator.error(
                name.span(),
                format!(
                    "a {} fault does not apply to topology kind {:?}",
                    info.name,
                    topology.kind_name()
                ),
            ));
        }
        if let Some(refusal) = info.refusal_on(server.flavour) {
            return Err(locator.error(name.span(), refusal));
        }
        if kinds.contains(&info.kind) {
            return Err(locator.error(name.span(), format!("{} is listed twice", info.name)));
        }
        kinds.push(info.kind);
    }
    if kinds.is_empty() {
        return Err(locator.error(spanned.span(), "a mix needs at least one fault kind"));
    }
    let episodes = {
        let text = raw.episodes.get_ref();
        let bad = || {
            locator.error(
                raw.episodes.span(),
                format!("bad episodes {text:?}: write a count (\"4\") or a range (\"2..8\") from 1 to 1000"),
            )
        };
        let (min, max) = text.split_once("..").unwrap_or((text, text));
        let min: u64 = min.trim().parse().map_err(|_| bad())?;
        let max: u64 = max.trim().parse().map_err(|_| bad())?;
        if min == 0 || min > max || max > 1000 {
            return Err(bad());
        }
        (min, max)
    };
    // Within the drift margin by default: client and server may each use
    // half of it.
    let drift = match &raw.drift {
        Some(drift) if !(*drift.get_ref() > 0.0 && *drift.get_ref() < 0.5) => {
            return Err(locator.error(drift.span(), "drift must be between 0 and 0.5"));
        }
        Some(drift) => *drift.get_ref(),
        None => lock.drift_factor / 2.0,
    };
    let jump = match &raw.jump {
        Some(jump) => {
            let value = locator.duration(jump)?;
            if value.is_zero() {
                return Err(locator.error(jump.span(), "a clock jump of zero does nothing"));
            }
            value
        }
        None => lock.ttl * 2,
    };
    let pairs = match &raw.pairs {
        Some(pairs) if !(0.0..=1.0).contains(pairs.get_ref()) => {
            return Err(locator.error(pairs.span(), "pairs is a chance, from 0 to 1"));
        }
        Some(pairs) => *pairs.get_ref(),
        None => 0.5,
    };
    Ok(MixSpec {
        kinds,
        episodes,
        drift,
        jump,
        pairs,
    })
}

/// The `[mix]` table in the file format, every key explicit.
pub(super) fn to_toml(mix: &MixSpec) -> String {
    let kinds: Vec<String> = mix
        .kinds
        .iter()
        .map(|kind| quoted(kind_name(*kind)))
        .collect();
    let episodes = if mix.episodes.0 == mix.episodes.1 {
        mix.episodes.0.to_string()
    } else {
        format!("{}..{}", mix.episodes.0, mix.episodes.1)
    };
    format!(
        "[mix]\nkinds = [{}]\nepisodes = {}\ndrift = {:?}\njump = {}\npairs = {:?}\n",
        kinds.join(", "),
        quoted(&episodes),
        mix.drift,
        quoted(&duration_text(mix.jump)),
        mix.pairs
    )
}
