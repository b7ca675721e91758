//! Reads what the deployment check needs from a server, keeping every
//! refusal as text instead of guessing past it.

use std::{
    collections::BTreeMap,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use redis::{ErrorKind, RedisError, Value, aio::ConnectionLike};

use super::CheckError;

/// The configuration parameters the check reads, each with the older name
/// a server before Redis 5 knows it by.
pub(super) const CONFIG: [(&str, Option<&str>); 8] = [
    ("maxmemory-policy", None),
    ("maxmemory", None),
    ("appendonly", None),
    ("appendfsync", None),
    ("save", None),
    ("min-replicas-to-write", Some("min-slaves-to-write")),
    ("min-replicas-max-lag", Some("min-slaves-max-lag")),
    ("replica-read-only", Some("slave-read-only")),
];

/// The `INFO` sections the check reads.
const INFO_SECTIONS: [&str; 4] = ["server", "memory", "persistence", "replication"];

/// A value as read, or why it could not be (an error reply's text, such as
/// `ERR unknown command 'config'` or `NOPERM ...`).
pub(super) type Read<T> = Result<T, String>;

/// What the node says it is (`ROLE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Role {
    /// A primary, with the replicas `ROLE` lists: only those online (a
    /// replica in its initial sync is attached but not listed).
    Primary { replicas: Vec<Replica> },
    /// A replica of `primary` (`host:port`), its link in `state`.
    Replica { primary: String, state: String },
    /// A Sentinel, which holds no data.
    Sentinel,
}

/// A replica attached to a primary, as the primary sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Replica {
    /// `ip:port`.
    pub(super) address: String,
    /// Its link: `online`, or a full sync's `wait_bgsave` (the primary is
    /// making the snapshot) and `send_bulk` (sending it).
    pub(super) state: String,
    /// Seconds since its last acknowledgement, where known (`INFO`'s
    /// `lag`; replicas acknowledge every second).
    pub(super) lag: Option<u64>,
}

impl Replica {
    /// Returns true if the replica receives the write stream.
    pub(super) fn is_online(&self) -> bool {
        self.state == "online"
    }
}

/// The server's clock against the local wall clock: the server's `TIME`
/// read between two local readings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ClockSample {
    /// Server time minus the midpoint of the two local readings, in µs.
    pub(super) offset_us: i64,
    /// Half the round trip, in µs: the offset is known to within this.
    pub(super) uncertainty_us: u64,
}

/// Everything read from one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Server {
    /// `CONFIG GET` per parameter of [`CONFIG`].
    pub(super) config: BTreeMap<&'static str, Read<String>>,
    /// The `INFO` fields of [`INFO_SECTIONS`], merged.
    pub(super) info: Read<BTreeMap<String, String>>,
    pub(super) role: Read<Role>,
    pub(super) clock: Read<ClockSample>,
}

impl Server {
    /// A configuration parameter, if it could be read.
    pub(super) fn config(&self, name: &str) -> Option<&str> {
        self.config.get(name)?.as_deref().ok()
    }

    /// Why a configuration parameter could not be read.
    pub(super) fn config_error(&self, name: &str) -> Option<&str> {
        self.config.get(name)?.as_ref().err().map(String::as_str)
    }

    /// An `INFO` field, if `INFO` could be read and has it.
    pub(super) fn info(&self, field: &str) -> Option<&str> {
        self.info.as_ref().ok()?.get(field).map(String::as_str)
    }

    /// Every replica attached, whatever its state, from `INFO
    /// replication` (`connected_slaves:N`, then `slaveI:ip=...,port=...,
    /// state=...,offset=...,lag=...`), if `INFO` could be read and has the
    /// count. A listed replica whose line is missing or unreadable keeps its
    /// place, with the state `unlisted`.
    pub(super) fn attached_replicas(&self) -> Option<Vec<Replica>> {
        let count: usize = self.info("connected_slaves")?.parse().ok()?;
        let replicas = (0..count)
            .map(|index| {
                let field = format!("slave{index}");
                self.info(&field)
                    .and_then(replica_line)
                    .unwrap_or_else(|| Replica {
                        address: field,
                        state: "unlisted".into(),
                        lag: None,
                    })
            })
            .collect();
        Some(replicas)
    }

    /// Why `field` is not in `INFO`: the refusal, or its absence.
    pub(super) fn info_error(&self, field: &str) -> String {
        match &self.info {
            Err(error) => format!("INFO: {error}"),
            Ok(_) => format!("INFO has no {field} field"),
        }
    }
}

/// Reads everything the check needs, in a fixed order. Error replies are
/// kept; a transport failure ends the check.
pub(super) async fn server<C: ConnectionLike + Send>(
    conn: &mut C,
    wall_clock: &(dyn Fn() -> SystemTime + Send + Sync),
) -> Result<Server, CheckError> {
    let mut config = BTreeMap::new();
    for (name, older) in CONFIG {
        let mut value = config_get(conn, name).await?;
        if let (Err(_), Some(older)) = (&value, older) {
            // A server older than Redis 5 knows only the older name.
            if let Ok(found) = config_get(conn, older).await? {
                value = Ok(found);
            }
        }
        config.insert(name, value);
    }
    let mut fields = Ok(BTreeMap::new());
    for section in INFO_SECTIONS {
        let reply = ask(conn, redis::cmd("INFO").arg(section)).await?;
        fields = match (fields, reply.and_then(|value| text(&value))) {
            (Ok(mut fields), Ok(text)) => {
                fields.extend(info_fields(&text));
                Ok(fields)
            }
            (Err(error), _) | (Ok(_), Err(error)) => Err(error),
        };
    }
    let role = ask(conn, &redis::cmd("ROLE"))
        .await?
        .and_then(|value| role(&value));
    let before = wall_clock();
    let time = ask(conn, &redis::cmd("TIME")).await?;
    let after = wall_clock();
    let clock = time.and_then(|value| clock_sample(&value, before, after));
    Ok(Server {
        config,
        info: fields,
        role,
        clock,
    })
}

/// Sends `cmd`: `Ok(Err(text))` for an error reply, `Err` for a transport
/// failure, after which nothing more can be read, or for a refused
/// authentication, under which nothing can be.
async fn ask<C: ConnectionLike + Send>(
    conn: &mut C,
    cmd: &redis::Cmd,
) -> Result<Read<Value>, CheckError> {
    match cmd.query_async::<Value>(conn).await {
        Ok(value) => Ok(Ok(value)),
        // NOAUTH refuses every command of a connection that has not
        // authenticated (WRONGPASS, one whose credentials were wrong): every
        // finding would be unknown, so the check cannot run at all.
        Err(error) if matches!(error.code(), Some("NOAUTH" | "WRONGPASS")) => {
            Err(CheckError::Authentication(reply_text(&error)))
        }
        Err(error) if is_error_reply(&error) => Ok(Err(reply_text(&error))),
        Err(error) => Err(CheckError::Connection(error)),
    }
}

fn is_error_reply(error: &RedisError) -> bool {
    matches!(error.kind(), ErrorKind::Server(_) | ErrorKind::Extension)
}

/// The error reply as Redis sent it: `CODE detail`.
fn reply_text(error: &RedisError) -> String {
    match (error.code(), error.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_owned(),
        _ => error.to_string(),
    }
}

async fn config_get<C: ConnectionLike + Send>(
    conn: &mut C,
    name: &str,
) -> Result<Read<String>, CheckError> {
    let reply = ask(conn, redis::cmd("CONFIG").arg("GET").arg(name)).await?;
    Ok(reply.and_then(|value| config_value(&value, name)))
}

/// The value of `name` in a `CONFIG GET` reply: `[name, value]` in RESP2,
/// `{name: value}` in RESP3. An empty reply means the server has no such
/// parameter (or hides it, as some managed services do).
fn config_value(value: &Value, name: &str) -> Read<String> {
    let pairs: Vec<(&Value, &Value)> = match value {
        Value::Array(items) => items
            .chunks(2)
            .filter_map(|pair| match pair {
                [key, value] => Some((key, value)),
                _ => None,
            })
            .collect(),
        Value::Map(items) => items.iter().map(|(key, value)| (key, value)).collect(),
        other => return Err(format!("unexpected reply {other:?}")),
    };
    pairs
        .into_iter()
        .find(|(key, _)| text(key).is_ok_and(|key| key.eq_ignore_ascii_case(name)))
        .map(|(_, value)| text(value))
        .unwrap_or_else(|| Err(format!("CONFIG GET {name} returned nothing")))
}

/// A string reply of any RESP flavour.
fn text(value: &Value) -> Read<String> {
    match value {
        Value::BulkString(bytes) => Ok(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(text) | Value::VerbatimString { text, .. } => Ok(text.clone()),
        Value::Okay => Ok("OK".to_owned()),
        Value::Int(number) => Ok(number.to_string()),
        other => Err(format!("unexpected reply {other:?}")),
    }
}

/// The `field:value` lines of an `INFO` reply.
fn info_fields(text: &str) -> impl Iterator<Item = (String, String)> + '_ {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.trim_end().split_once(':'))
        .map(|(field, value)| (field.to_owned(), value.to_owned()))
}

/// One replica's line of `INFO replication`:
/// `ip=127.0.0.1,port=6380,state=online,offset=42,lag=0`.
fn replica_line(line: &str) -> Option<Replica> {
    let fields: BTreeMap<&str, &str> = line
        .split(',')
        .filter_map(|pair| pair.split_once('='))
        .collect();
    Some(Replica {
        address: format!("{}:{}", fields.get("ip")?, fields.get("port")?),
        state: (*fields.get("state")?).to_owned(),
        lag: fields.get("lag").and_then(|lag| lag.parse().ok()),
    })
}

/// Parses `ROLE`: `[master, offset, [[ip, port, offset], ...]]`,
/// `[slave, ip, port, state, offset]` or `[sentinel, [names]]`.
fn role(value: &Value) -> Read<Role> {
    let unexpected = || format!("unexpected ROLE reply {value:?}");
    let Value::Array(items) = value else {
        return Err(unexpected());
    };
    let name = items
        .first()
        .map(text)
        .transpose()?
        .ok_or_else(unexpected)?;
    match name.as_str() {
        "master" => match items.get(2) {
            Some(Value::Array(listed)) => {
                let replicas = listed
                    .iter()
                    .map(|replica| match replica {
                        Value::Array(fields) if fields.len() >= 2 => Ok(Replica {
                            address: format!("{}:{}", text(&fields[0])?, text(&fields[1])?),
                            // ROLE lists only the replicas that are online.
                            state: "online".into(),
                            lag: None,
                        }),
                        _ => Err(unexpected()),
                    })
                    .collect::<Read<_>>()?;
                Ok(Role::Primary { replicas })
            }
            _ => Err(unexpected()),
        },
        "slave" => {
            let field = |index: usize| items.get(index).map(text).transpose();
            let host = field(1)?.ok_or_else(unexpected)?;
            let port = field(2)?.ok_or_else(unexpected)?;
            let state = field(3)?.ok_or_else(unexpected)?;
            Ok(Role::Replica {
                primary: format!("{host}:{port}"),
                state,
            })
        }
        "sentinel" => Ok(Role::Sentinel),
        _ => Err(unexpected()),
    }
}

/// Compares `TIME` (`[seconds, microseconds]`) with the midpoint of the
/// local readings taken just before and just after it.
fn clock_sample(value: &Value, before: SystemTime, after: SystemTime) -> Read<ClockSample> {
    let unexpected = || format!("unexpected TIME reply {value:?}");
    let Value::Array(items) = value else {
        return Err(unexpected());
    };
    let [seconds, micros] = items.as_slice() else {
        return Err(unexpected());
    };
    let number = |value: &Value| {
        text(value)
            .ok()
            .and_then(|text| text.parse::<u64>().ok())
            .ok_or_else(unexpected)
    };
    let server_us = i128::from(number(seconds)?) * 1_000_000 + i128::from(number(micros)?);
    let since_epoch_us = |time: SystemTime| -> i128 {
        match time.duration_since(UNIX_EPOCH) {
            Ok(after_epoch) => i128::try_from(after_epoch.as_micros()).unwrap_or(i128::MAX),
            Err(before_epoch) => {
                -i128::try_from(before_epoch.duration().as_micros()).unwrap_or(i128::MAX)
            }
        }
    };
    let (before_us, after_us) = (since_epoch_us(before), since_epoch_us(after));
    let midpoint = (before_us + after_us) / 2;
    let clamp =
        |value: i128| i64::try_from(value).unwrap_or(if value < 0 { i64::MIN } else { i64::MAX });
    Ok(ClockSample {
        offset_us: clamp(server_us - midpoint),
        uncertainty_us: u64::try_from((after_us - before_us).max(0) / 2).unwrap_or(u64::MAX),
    })
}

impl ClockSample {
    /// The offset's size beyond its uncertainty: the least the clocks
    /// certainly disagree by.
    pub(super) fn certain_offset(self) -> Duration {
        Duration::from_micros(
            self.offset_us
                .unsigned_abs()
                .saturating_sub(self.uncertainty_us),
        )
    }

    /// `+12.3 ms ± 0.1 ms` (positive: the server is ahead).
    pub(super) fn describe(self) -> String {
        // Rounded to 0.1 ms; the sign is that of the rounded value, so
        // -0.04 ms prints as +0.0 ms.
        let tenths = |micros: u64| micros.saturating_add(50) / 100;
        let offset = tenths(self.offset_us.unsigned_abs());
        let sign = if self.offset_us < 0 && offset > 0 {
            '-'
        } else {
            '+'
        };
        let uncertainty = tenths(self.uncertainty_us);
        format!(
            "{sign}{}.{} ms ± {}.{} ms",
            offset / 10,
            offset % 10,
            uncertainty / 10,
            uncertainty % 10
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    #[test]
    fn config_get_replies_parse_in_both_protocols() {
        let resp2 = Value::Array(vec![bulk("maxmemory-policy"), bulk("allkeys-lru")]);
        assert_eq!(
            config_value(&resp2, "maxmemory-policy"),
            Ok("allkeys-lru".into())
        );
        let resp3 = Value::Map(vec![(bulk("save"), bulk(""))]);
        assert_eq!(config_value(&resp3, "save"), Ok(String::new()));
        assert!(config_value(&Value::Array(vec![]), "save").is_err());
        assert!(config_value(&Value::Nil, "save").is_err());
    }

    #[test]
    fn info_lines_become_fields() {
        let fields: BTreeMap<_, _> =
            info_fields("# Replication\r\nrole:master\r\nconnected_slaves:2\r\n\r\n").collect();
        assert_eq!(fields.get("role").map(String::as_str), Some("master"));
        assert_eq!(
            fields.get("connected_slaves").map(String::as_str),
            Some("2")
        );
        assert_eq!(fields.len(), 2);
    }

    #[test]
    fn role_replies_parse() {
        let primary = Value::Array(vec![
            bulk("master"),
            Value::Int(10),
            Value::Array(vec![Value::Array(vec![
                bulk("127.0.0.1"),
                bulk("6380"),
                bulk("10"),
            ])]),
        ]);
        assert_eq!(
            role(&primary),
            Ok(Role::Primary {
                replicas: vec![Replica {
                    address: "127.0.0.1:6380".into(),
                    state: "online".into(),
                    lag: None,
                }]
            })
        );
        let replica = Value::Array(vec![
            bulk("slave"),
            bulk("10.0.0.1"),
            Value::Int(6379),
            bulk("connected"),
            Value::Int(10),
        ]);
        assert_eq!(
            role(&replica),
            Ok(Role::Replica {
                primary: "10.0.0.1:6379".into(),
                state: "connected".into()
            })
        );
        assert!(role(&Value::Array(vec![bulk("master")])).is_err());
        assert!(role(&Value::Nil).is_err());
    }

    #[test]
    fn info_lists_every_attached_replica_whatever_its_state() {
        let text = "# Replication\r\nrole:master\r\nconnected_slaves:3\r\n\
                    slave0:ip=10.0.0.2,port=6380,state=online,offset=42,lag=1\r\n\
                    slave1:ip=10.0.0.3,port=6380,state=wait_bgsave,offset=0,lag=0\r\n";
        let server = Server {
            config: BTreeMap::new(),
            info: Ok(info_fields(text).collect()),
            role: Err("NOPERM".into()),
            clock: Err("NOPERM".into()),
        };
        let replica = |address: &str, state: &str, lag| Replica {
            address: address.into(),
            state: state.into(),
            lag,
        };
        assert_eq!(
            server.attached_replicas(),
            Some(vec![
                replica("10.0.0.2:6380", "online", Some(1)),
                replica("10.0.0.3:6380", "wait_bgsave", Some(0)),
                // Counted but not listed: attached all the same.
                replica("slave2", "unlisted", None),
            ])
        );
        let mut refused = server;
        refused.info = Err("NOPERM".into());
        assert_eq!(refused.attached_replicas(), None);
    }

    #[test]
    fn clock_offset_is_measured_from_the_midpoint() {
        let before = UNIX_EPOCH + Duration::from_secs(1_000);
        let after = before + Duration::from_millis(2);
        // The server says 1000.501 s: 0.5 ms after the midpoint (1000.001 s).
        let time = Value::Array(vec![bulk("1000"), bulk("501000")]);
        let sample = clock_sample(&time, before, after).expect("a TIME reply");
        assert_eq!(sample.offset_us, 500_000);
        assert_eq!(sample.uncertainty_us, 1_000);
        assert_eq!(sample.certain_offset(), Duration::from_micros(499_000));
        assert_eq!(sample.describe(), "+500.0 ms ± 1.0 ms");
        let behind = Value::Array(vec![bulk("999"), bulk("0")]);
        let sample = clock_sample(&behind, before, after).expect("a TIME reply");
        assert_eq!(sample.offset_us, -1_001_000);
        assert_eq!(sample.describe(), "-1001.0 ms ± 1.0 ms");
        let tiny = ClockSample {
            offset_us: -40,
            uncertainty_us: 30,
        };
        assert_eq!(tiny.describe(), "+0.0 ms ± 0.0 ms");
        let rounded = ClockSample {
            offset_us: -9_999_960,
            uncertainty_us: 149,
        };
        assert_eq!(rounded.describe(), "-10000.0 ms ± 0.1 ms");
        assert!(clock_sample(&Value::Array(vec![bulk("x"), bulk("1")]), before, after).is_err());
    }

    mod fuzz {
        //! Arbitrary replies into every reader here: never a panic, and a
        //! reading only from the shape it documents.

        use proptest::{collection::vec, prelude::*};

        use super::*;
        use crate::adapter::fuzz::strategies::{number_text, text, value};

        fn instant() -> impl Strategy<Value = SystemTime> {
            (any::<bool>(), any::<u64>(), 0_u32..1_000_000_000).prop_map(
                |(after_epoch, secs, nanos)| {
                    let offset = Duration::new(secs, nanos);
                    let instant = if after_epoch {
                        UNIX_EPOCH.checked_add(offset)
                    } else {
                        UNIX_EPOCH.checked_sub(offset)
                    };
                    instant.unwrap_or(UNIX_EPOCH)
                },
            )
        }

        proptest! {
            #![proptest_config(ProptestConfig {
                cases: 10_000,
                failure_persistence: None,
                ..ProptestConfig::default()
            })]

            #[test]
            fn config_replies_read_or_fail(
                reply in prop_oneof![
                    vec((text(), value()), 0..3).prop_map(|pairs| Value::Array(
                        pairs.into_iter().flat_map(|(name, value)| [bulk(&name), value]).collect()
                    )),
                    vec((text(), value()), 0..3).prop_map(|pairs| Value::Map(
                        pairs.into_iter().map(|(name, value)| (bulk(&name), value)).collect()
                    )),
                    value(),
                ],
                name in text(),
            ) {
                if config_value(&reply, &name).is_ok() {
                    prop_assert!(matches!(reply, Value::Array(_) | Value::Map(_)));
                }
            }

            #[test]
            fn role_replies_read_or_fail(
                reply in prop_oneof![
                    (prop_oneof![Just("master".to_owned()), Just("slave".to_owned()), text()],
                        vec(value(), 0..5))
                        .prop_map(|(name, mut rest)| {
                            rest.insert(0, bulk(&name));
                            Value::Array(rest)
                        }),
                    value(),
                ],
            ) {
                if let Ok(Role::Primary { replicas }) = role(&reply) {
                    let Value::Array(items) = &reply else {
                        return Err(TestCaseError::fail("a role from a non-array"));
                    };
                    prop_assert!(matches!(&items[2], Value::Array(listed) if listed.len() == replicas.len()));
                }
            }

            #[test]
            fn time_replies_read_or_fail(
                reply in prop_oneof![
                    (number_text(), number_text())
                        .prop_map(|(secs, micros)| Value::Array(vec![bulk(&secs), bulk(&micros)])),
                    value(),
                ],
                before in instant(),
                after in instant(),
            ) {
                if let Ok(sample) = clock_sample(&reply, before, after) {
                    let _ = sample.certain_offset();
                    prop_assert!(sample.describe().ends_with(" ms"));
                }
            }

            #[test]
            fn info_text_reads_into_fields(text in prop_oneof![text(), any::<String>()]) {
                for (field, _) in info_fields(&text) {
                    prop_assert!(!field.contains(':') && !field.starts_with('#'));
                }
            }

            #[test]
            fn replica_lines_read_or_fail(line in prop_oneof![text(), any::<String>()]) {
                if let Some(replica) = replica_line(&line) {
                    prop_assert!(line.contains("ip=") && line.contains("state="));
                    prop_assert!(replica.address.contains(':'));
                }
            }
        }
    }
}
