//! Writing scenarios and fault schedules back in the file format.

use std::time::Duration;

use super::{
    names::{
        EXPECTS, FENCINGS, FLAVOURS, PERSISTENCES, WORKLOAD_KINDS, kind_name, name_of,
        property_name,
    },
    text::{duration_text, offset_text, quoted, range_text},
};
use crate::{
    config::{Scenario, Topology, WorkloadKind},
    outcome::ConcreteFault,
};

/// Writes `scenario` back in the file format, every key explicit;
/// [`parse_scenario`](super::parse_scenario) reads it back to an equal
/// scenario.
pub fn to_toml(scenario: &Scenario) -> String {
    let mut out = String::new();
    let mut line = |text: String| {
        out.push_str(&text);
        out.push('\n');
    };
    line(format!("name = {}", quoted(&scenario.name)));
    line(format!("description = {}", quoted(&scenario.description)));
    line(format!("seeds = {}", scenario.seeds));
    line(format!(
        "duration = {}",
        quoted(&duration_text(scenario.duration))
    ));
    line(format!(
        "expect = {}",
        quoted(name_of(&EXPECTS, scenario.expect))
    ));
    if let Some(property) = scenario.property {
        line(format!("property = {}", quoted(property_name(property))));
    }
    line(String::new());
    line("[topology]".to_owned());
    line(format!("kind = {}", quoted(scenario.topology.kind_name())));
    match &scenario.topology {
        Topology::Single => {}
        Topology::PrimaryReplica {
            replicas,
            replication_lag,
        } => {
            line(format!("replicas = {replicas}"));
            line(format!(
                "replication_lag = {}",
                quoted(&range_text(*replication_lag))
            ));
        }
        Topology::Redlock { nodes } => line(format!("nodes = {nodes}")),
        Topology::Sentinel {
            replicas,
            sentinels,
            replication_lag,
            sentinel_lag,
        } => {
            line(format!("replicas = {replicas}"));
            line(format!("sentinels = {sentinels}"));
            line(format!(
                "replication_lag = {}",
                quoted(&range_text(*replication_lag))
            ));
            line(format!(
                "sentinel_lag = {}",
                quoted(&range_text(*sentinel_lag))
            ));
        }
        Topology::Cluster {
            shards,
            replicas,
            replication_lag,
            node_timeout,
        } => {
            line(format!("shards = {shards}"));
            line(format!("replicas = {replicas}"));
            line(format!(
                "replication_lag = {}",
                quoted(&range_text(*replication_lag))
            ));
            line(format!(
                "node_timeout = {}",
                quoted(&duration_text(*node_timeout))
            ));
        }
    }
    line(String::new());
    line("[server]".to_owned());
    line(format!(
        "flavour = {}",
        quoted(name_of(&FLAVOURS, scenario.server.flavour))
    ));
    line(format!(
        "persistence = {}",
        quoted(name_of(&PERSISTENCES, scenario.server.persistence))
    ));
    line(String::new());
    let lock = &scenario.lock;
    line("[lock]".to_owned());
    line(format!("ttl = {}", quoted(&duration_text(lock.ttl))));
    if let Some(renew_every) = lock.renew_every {
        line(format!(
            "renew_every = {}",
            quoted(&duration_text(renew_every))
        ));
    }
    // Debug keeps a decimal point, so the value reads back as a float.
    line(format!("drift_factor = {:?}", lock.drift_factor));
    line(format!(
        "fencing = {}",
        quoted(name_of(&FENCINGS, lock.fencing))
    ));
    line(format!("wait_replicas = {}", lock.wait_replicas));
    if let Some((local, replicas)) = lock.wait_aof {
        line(format!("wait_aof = [{local}, {replicas}]"));
    }
    if let Some(wait) = lock.wait {
        line(format!("wait = {}", quoted(&duration_text(wait))));
    }
    line(String::new());
    let clients = &scenario.clients;
    line("[clients]".to_owned());
    line(format!("count = {}", clients.count));
    line(format!("hold = {}", quoted(&range_text(clients.hold))));
    line(format!("think = {}", quoted(&range_text(clients.think))));
    line(format!("unfenced_register = {}", clients.unfenced_register));
    if clients.locks != 1 {
        line(format!("locks = {}", clients.locks));
    }
    if clients.drop_guard > 0.0 {
        line(format!("drop_guard = {}", clients.drop_guard));
    }
    if clients.cancel > 0.0 {
        line(format!("cancel = {}", clients.cancel));
    }
    let workload = &clients.workload;
    line(String::new());
    line("[workload]".to_owned());
    line(format!(
        "kind = {}",
        quoted(name_of(&WORKLOAD_KINDS, workload.kind))
    ));
    match workload.kind {
        WorkloadKind::Semaphore => line(format!("permits = {}", workload.permits)),
        // Debug keeps a decimal point, so the value reads back as a float.
        WorkloadKind::ReadWrite => line(format!("read_share = {:?}", workload.read_share)),
        WorkloadKind::Mutex | WorkloadKind::Fair => {}
    }
    for fault in &scenario.faults {
        line(String::new());
        line("[[fault]]".to_owned());
        line(format!("kind = {}", quoted(kind_name(fault.kind))));
        line(format!("at = {}", quoted(&range_text(fault.at))));
        line(format!("target = {}", quoted(&fault.target.to_string())));
        if let Some(duration) = fault.duration {
            line(format!("duration = {}", quoted(&range_text(duration))));
        }
        if let Some(every) = fault.every {
            line(format!("every = {}", quoted(&range_text(every))));
        }
        if let Some(rate) = fault.rate {
            line(format!("rate = {rate:?}"));
        }
        if let Some(offset) = fault.offset {
            line(format!("offset = {}", quoted(&offset_text(offset))));
        }
        if let Some(delay) = fault.delay {
            line(format!("delay = {}", quoted(&range_text(delay))));
        }
    }
    if let Some(mix) = &scenario.mix {
        out.push('\n');
        out.push_str(&super::mix::to_toml(mix));
    }
    out
}

/// A schedule in scenario-file form (`[[fault]]` tables), ready to paste
/// into a file as a regression scenario.
pub fn schedule_toml(schedule: &[ConcreteFault]) -> String {
    let text = |d: Duration| quoted(&duration_text(d));
    let mut out = String::new();
    for fault in schedule {
        out.push_str("[[fault]]\n");
        out.push_str(&format!("kind = \"{}\"\n", kind_name(fault.kind)));
        out.push_str(&format!("at = {}\n", text(fault.at)));
        out.push_str(&format!("target = {}\n", quoted(&fault.target.to_string())));
        if let Some(duration) = fault.duration {
            out.push_str(&format!("duration = {}\n", text(duration)));
        }
        if let Some(delay) = fault.delay {
            out.push_str(&format!("delay = {}\n", text(delay)));
        }
        if let Some(rate) = fault.rate {
            out.push_str(&format!("rate = {rate:?}\n"));
        }
        if let Some(offset) = fault.offset {
            out.push_str(&format!("offset = {}\n", quoted(&offset_text(offset))));
        }
        out.push('\n');
    }
    out
}
