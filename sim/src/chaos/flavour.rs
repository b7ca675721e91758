//! Which server binary a scenario's `[server] flavour` runs on, found
//! before anything starts and checked again from each node's own `INFO
//! server` once it answers.
//!
//! A flavour's binary is looked for in `--servers DIR` (default
//! `target/servers`), in the layout `scripts/servers.sh FLAVOUR` makes:
//! `DIR/FLAVOUR/path/redis-server`. Debian's Redis 7.0 may come from `PATH`
//! too. A flavour with no binary there, or one whose binary is another
//! server, is refused by name and by where the file writes it.

use std::path::Path;

use servers::{Binaries, Family, Identity, Want};

use super::ChaosError;
use crate::{
    config::{Scenario, ServerFlavour},
    scenario::names::{FLAVOURS, name_of},
};

/// The server and release a flavour is, or why none can run it.
pub fn want(flavour: ServerFlavour) -> Result<Want, &'static str> {
    let (family, release) = match flavour {
        ServerFlavour::Redis70 => (Family::Redis, (7, 0)),
        ServerFlavour::Redis82 => (Family::Redis, (8, 2)),
        ServerFlavour::Valkey81 => (Family::Valkey, (8, 1)),
        ServerFlavour::Valkey91 => (Family::Valkey, (9, 1)),
        ServerFlavour::Redis84 => {
            return Err(
                "the simulator knows Redis 8.4 from its documentation only: no build of it is reachable to run",
            );
        }
    };
    Ok(Want {
        family,
        release: Some(release),
    })
}

/// The binaries of `flavour`: `servers/FLAVOUR/path/redis-server`, or for
/// Redis 7.0 the first `redis-server` on `PATH` as well; the one found is
/// checked to be that release from its `--version`.
pub fn find(flavour: ServerFlavour, servers: &Path) -> Result<Binaries, String> {
    let wanted = want(flavour)?;
    let name = name_of(&FLAVOURS, flavour);
    let dir = servers.join(name).join("path");
    let fetched = Binaries::in_dir(&dir);
    let found = match (fetched, flavour) {
        (Ok(found), _) => found,
        (Err(_), ServerFlavour::Redis70) => {
            Binaries::on_path().map_err(|error| error.to_string())?
        }
        (Err(_), _) => {
            return Err(format!(
                "no {name} server in {} (`bash scripts/servers.sh {name}` fetches it there; \
                 or give --servers DIR holding {name}/path/redis-server)",
                dir.display()
            ));
        }
    };
    let identity = found.identity();
    if !wanted.admits(&identity) {
        return Err(format!(
            "{} is {identity}, not {name}",
            found.server().display()
        ));
    }
    Ok(found)
}

/// [`find`] for `scenario`, refused with where `file` writes its flavour.
pub fn check(file: &str, scenario: &Scenario, servers: &Path) -> Result<Binaries, ChaosError> {
    let flavour = scenario.server.flavour;
    find(flavour, servers).map_err(|why| {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let (line, column) = locate_flavour(&text);
        ChaosError::NoServer {
            file: file.to_owned(),
            line,
            column,
            flavour: name_of(&FLAVOURS, flavour),
            why,
        }
    })
}

/// Checks that a started process is the server its flavour wants, from
/// what its own `INFO server` said (`None`: it did not say).
pub fn check_started(
    what: &str,
    expected: Identity,
    said: Option<Identity>,
) -> Result<(), ChaosError> {
    match said {
        Some(identity) if identity == expected => Ok(()),
        other => Err(ChaosError::WrongServer {
            what: what.to_owned(),
            expected: expected.to_string(),
            found: other.map_or_else(
                || "a server that names no release".to_owned(),
                |i| i.to_string(),
            ),
        }),
    }
}

/// Where `[server] flavour` is written in a scenario file's text (1-based
/// line and column), else its `[server]` table, else the file's start.
fn locate_flavour(text: &str) -> (usize, usize) {
    let offset = text
        .find("[server]")
        .map(|at| text[at..].find("flavour").map_or(at, |k| at + k))
        .unwrap_or(0);
    crate::scenario::line_column(text, offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flavour_but_the_documented_one_names_a_release() {
        for (name, flavour) in FLAVOURS {
            match want(flavour) {
                Ok(wanted) => {
                    let (family, release) = name.split_once('-').expect("FAMILY-RELEASE");
                    assert_eq!(wanted.family.to_string(), family, "{name}");
                    let (major, minor) = wanted.release.expect("a release");
                    assert_eq!(format!("{major}.{minor}"), release, "{name}");
                }
                Err(why) => assert_eq!(flavour, ServerFlavour::Redis84, "{name}: {why}"),
            }
        }
    }

    #[test]
    fn a_flavour_is_located_where_the_file_writes_it() {
        let text = "name = \"x\"\n\n[server]\npersistence = \"none\"\n  flavour = \"valkey-9.1\"\n";
        assert_eq!(locate_flavour(text), (5, 3));
        assert_eq!(locate_flavour("[server]\n"), (1, 1));
        assert_eq!(locate_flavour("name = \"x\"\n"), (1, 1));
    }

    #[test]
    fn a_flavour_missing_from_the_directory_is_refused_by_name() {
        let empty = Path::new("no/such/servers/dir");
        let why = find(ServerFlavour::Valkey91, empty).expect_err("nothing there");
        assert!(
            why.contains("no valkey-9.1 server in no/such/servers/dir/valkey-9.1/path"),
            "{why}"
        );
        assert!(why.contains("scripts/servers.sh valkey-9.1"), "{why}");
        let why = find(ServerFlavour::Redis84, empty).expect_err("never reachable");
        assert!(why.contains("documentation only"), "{why}");
    }

    #[test]
    fn a_process_answering_as_another_server_is_named() {
        let version = |major, minor, patch| servers::Version {
            major,
            minor,
            patch,
        };
        let valkey = Identity {
            family: Family::Valkey,
            version: version(9, 1, 2),
        };
        assert!(check_started("redis-0", valkey, Some(valkey)).is_ok());
        let redis = Identity {
            family: Family::Redis,
            version: version(7, 0, 15),
        };
        let error = check_started("redis-1", valkey, Some(redis)).expect_err("another server");
        assert_eq!(
            error.to_string(),
            "redis-1 answers as Redis 7.0.15, but the run started it as Valkey 9.1.2"
        );
        assert!(check_started("redis-2", valkey, None).is_err());
    }
}
