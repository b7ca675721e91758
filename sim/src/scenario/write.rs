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
    config::{
        ClientsConfig, FaultSpec, LockConfig, Scenario, ServerConfig, Topology, WorkloadConfig,
        WorkloadKind,
    },
    outcome::ConcreteFault,
};

/// Writes `scenario` back in the file format, every key explicit;
/// [`parse_scenario`](super::parse_scenario) reads it back to an equal
/// scenario.
pub fn to_toml(scenario: &Scenario) -> String {
    let mut out = Lines::default();
    write_header(&mut out, scenario);
    out.line(String::new());
    write_topology(&mut out, &scenario.topology);
    out.line(String::new());
    write_server(&mut out, &scenario.server);
    out.line(String::new());
    write_lock(&mut out, &scenario.lock);
    out.line(String::new());
    write_clients(&mut out, &scenario.clients);
    out.line(String::new());
    write_workload(&mut out, &scenario.clients.workload);
    write_faults(&mut out, &scenario.faults);
    let mut out = out.0;
    if let Some(mix) = &scenario.mix {
        out.push('\n');
        out.push_str(&super::mix::to_toml(mix));
    }
    out
}

/// A file's text, line by line.
#[derive(Default)]
struct Lines(String);

impl Lines {
    fn line(&mut self, text: String) {
        self.0.push_str(&text);
        self.0.push('\n');
    }
}

/// The top-level keys.
fn write_header(out: &mut Lines, scenario: &Scenario) {
    out.line(format!("name = {}", quoted(&scenario.name)));
    out.line(format!("description = {}", quoted(&scenario.description)));
    out.line(format!("seeds = {}", scenario.seeds));
    out.line(format!("min_grants = {}", scenario.min_grants));
    out.line(format!(
        "max_stall = \"{}\"",
        duration_text(scenario.max_stall)
    ));
    out.line(format!(
        "duration = {}",
        quoted(&duration_text(scenario.duration))
    ));
    out.line(format!(
        "expect = {}",
        quoted(name_of(&EXPECTS, scenario.expect))
    ));
    if let Some(property) = scenario.property {
        out.line(format!("property = {}", quoted(property_name(property))));
    }
}

/// The `[topology]` table, with the keys its kind takes.
fn write_topology(out: &mut Lines, topology: &Topology) {
    out.line("[topology]".to_owned());
    out.line(format!("kind = {}", quoted(topology.kind_name())));
    match topology {
        Topology::Single => {}
        Topology::PrimaryReplica {
            replicas,
            replication_lag,
        } => {
            out.line(format!("replicas = {replicas}"));
            out.line(format!(
                "replication_lag = {}",
                quoted(&range_text(*replication_lag))
            ));
        }
        Topology::Redlock { nodes } => out.line(format!("nodes = {nodes}")),
        Topology::Sentinel {
            replicas,
            sentinels,
            replication_lag,
            sentinel_lag,
        } => {
            out.line(format!("replicas = {replicas}"));
            out.line(format!("sentinels = {sentinels}"));
            out.line(format!(
                "replication_lag = {}",
                quoted(&range_text(*replication_lag))
            ));
            out.line(format!(
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
            out.line(format!("shards = {shards}"));
            out.line(format!("replicas = {replicas}"));
            out.line(format!(
                "replication_lag = {}",
                quoted(&range_text(*replication_lag))
            ));
            out.line(format!(
                "node_timeout = {}",
                quoted(&duration_text(*node_timeout))
            ));
        }
    }
}

/// The `[server]` table.
fn write_server(out: &mut Lines, server: &ServerConfig) {
    out.line("[server]".to_owned());
    out.line(format!(
        "flavour = {}",
        quoted(name_of(&FLAVOURS, server.flavour))
    ));
    out.line(format!(
        "persistence = {}",
        quoted(name_of(&PERSISTENCES, server.persistence))
    ));
}

/// The `[lock]` table.
fn write_lock(out: &mut Lines, lock: &LockConfig) {
    out.line("[lock]".to_owned());
    out.line(format!("ttl = {}", quoted(&duration_text(lock.ttl))));
    if let Some(renew_every) = lock.renew_every {
        out.line(format!(
            "renew_every = {}",
            quoted(&duration_text(renew_every))
        ));
    }
    // Debug keeps a decimal point, so the value reads back as a float.
    out.line(format!("drift_factor = {:?}", lock.drift_factor));
    out.line(format!(
        "fencing = {}",
        quoted(name_of(&FENCINGS, lock.fencing))
    ));
    out.line(format!("wait_replicas = {}", lock.wait_replicas));
    if let Some((local, replicas)) = lock.wait_aof {
        out.line(format!("wait_aof = [{local}, {replicas}]"));
    }
    if let Some(wait) = lock.wait {
        out.line(format!("wait = {}", quoted(&duration_text(wait))));
    }
}

/// The `[clients]` table.
fn write_clients(out: &mut Lines, clients: &ClientsConfig) {
    out.line("[clients]".to_owned());
    out.line(format!("count = {}", clients.count));
    out.line(format!("hold = {}", quoted(&range_text(clients.hold))));
    out.line(format!("think = {}", quoted(&range_text(clients.think))));
    out.line(format!("unfenced_register = {}", clients.unfenced_register));
    if clients.locks != 1 {
        out.line(format!("locks = {}", clients.locks));
    }
    if clients.drop_guard > 0.0 {
        out.line(format!("drop_guard = {}", clients.drop_guard));
    }
    if clients.cancel > 0.0 {
        out.line(format!("cancel = {}", clients.cancel));
    }
}

/// The `[workload]` table, with the key its kind takes.
fn write_workload(out: &mut Lines, workload: &WorkloadConfig) {
    out.line("[workload]".to_owned());
    out.line(format!(
        "kind = {}",
        quoted(name_of(&WORKLOAD_KINDS, workload.kind))
    ));
    match workload.kind {
        WorkloadKind::Semaphore => out.line(format!("permits = {}", workload.permits)),
        // Debug keeps a decimal point, so the value reads back as a float.
        WorkloadKind::ReadWrite => out.line(format!("read_share = {:?}", workload.read_share)),
        WorkloadKind::Mutex | WorkloadKind::Fair => {}
    }
}

/// One `[[fault]]` table per fault.
fn write_faults(out: &mut Lines, faults: &[FaultSpec]) {
    for fault in faults {
        out.line(String::new());
        out.line("[[fault]]".to_owned());
        out.line(format!("kind = {}", quoted(kind_name(fault.kind))));
        out.line(format!("at = {}", quoted(&range_text(fault.at))));
        out.line(format!("target = {}", quoted(&fault.target.to_string())));
        if let Some(duration) = fault.duration {
            out.line(format!("duration = {}", quoted(&range_text(duration))));
        }
        if let Some(every) = fault.every {
            out.line(format!("every = {}", quoted(&range_text(every))));
        }
        if let Some(rate) = fault.rate {
            out.line(format!("rate = {rate:?}"));
        }
        if let Some(offset) = fault.offset {
            out.line(format!("offset = {}", quoted(&offset_text(offset))));
        }
        if let Some(delay) = fault.delay {
            out.line(format!("delay = {}", quoted(&range_text(delay))));
        }
    }
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
