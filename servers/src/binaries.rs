//! Which server binary to run, and which server a running one is.

use std::{
    fmt,
    path::{Path, PathBuf},
    process::Command,
    str::FromStr,
};

/// The environment variable naming a `redis-server` outright (tests).
pub const SERVER_BIN_VAR: &str = "REDIS_SERVER_BIN";

/// The environment variable naming the server a test run must be talking
/// to ([`Want`]: `redis`, `valkey`, `valkey-9.1`): `scripts/test.sh` sets it
/// for each pass of its server matrix, so that a pass meant for Valkey
/// cannot quietly run against a `redis-server` found first on `PATH`.
pub const TEST_SERVER_VAR: &str = "LOCK_TEST_SERVER";

/// How to get a server, for every message that finds none.
const HOW_TO_GET: &str = "install it with `apt-get install redis-server` \
    (with redis-tools for redis-cli; scripts/test.sh does), set REDIS_SERVER_BIN \
    to a redis-server, or put a directory holding Valkey's or Redis's binaries \
    first on PATH (`bash scripts/valkey.sh` prints one)";

/// A server family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// Redis (`redis_version` alone in `INFO server`).
    Redis,
    /// Valkey (`valkey_version` in `INFO server`).
    Valkey,
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Redis => "redis",
            Self::Valkey => "valkey",
        })
    }
}

/// A release number, `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    /// The major release.
    pub major: u32,
    /// The minor release.
    pub minor: u32,
    /// The patch level.
    pub patch: u32,
}

impl FromStr for Version {
    type Err = ();

    /// `7.0.15` (a missing patch reads as 0).
    fn from_str(text: &str) -> Result<Self, ()> {
        let mut parts = text.trim().split('.').map(str::parse::<u32>);
        let major = parts.next().ok_or(())?.map_err(|_| ())?;
        let minor = parts.next().ok_or(())?.map_err(|_| ())?;
        let patch = parts.next().transpose().map_err(|_| ())?.unwrap_or(0);
        Ok(Self {
            major,
            minor,
            patch,
        })
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Which server a binary is, or a running process says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Identity {
    /// Its family.
    pub family: Family,
    /// Its release (Valkey's own, not the `redis_version` it also reports).
    pub version: Version,
}

impl Identity {
    /// From an `INFO server` reply: Valkey when it has `valkey_version`
    /// (Valkey also reports a `redis_version`, 7.2.4, for old clients),
    /// else Redis by `redis_version`.
    pub fn from_info(info: &str) -> Option<Self> {
        let field = |name: &str| {
            info.lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|value| value.parse().ok())
        };
        if let Some(version) = field("valkey_version") {
            return Some(Self {
                family: Family::Valkey,
                version,
            });
        }
        field("redis_version").map(|version| Self {
            family: Family::Redis,
            version,
        })
    }

    /// From what `server --version` prints: `Redis server v=7.0.15 …` or
    /// `Valkey server v=8.1.8 …`.
    pub fn from_version_line(text: &str) -> Option<Self> {
        let (family, rest) = if let Some(rest) = text.strip_prefix("Valkey server v=") {
            (Family::Valkey, rest)
        } else {
            (Family::Redis, text.strip_prefix("Redis server v=")?)
        };
        let version = rest.split_whitespace().next()?.parse().ok()?;
        Some(Self { family, version })
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let family = match self.family {
            Family::Redis => "Redis",
            Family::Valkey => "Valkey",
        };
        write!(f, "{family} {}", self.version)
    }
}

/// The server a caller requires: a family, and a `major.minor` release
/// when it names one. Written `redis`, `valkey`, `redis-8.2`,
/// `valkey-9.1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Want {
    /// The family.
    pub family: Family,
    /// The release, `(major, minor)`; `None` takes any.
    pub release: Option<(u32, u32)>,
}

impl Want {
    /// Any release of `family`.
    pub fn family(family: Family) -> Self {
        Self {
            family,
            release: None,
        }
    }

    /// Whether `identity` is the server wanted.
    pub fn admits(&self, identity: &Identity) -> bool {
        identity.family == self.family
            && self.release.is_none_or(|(major, minor)| {
                (identity.version.major, identity.version.minor) == (major, minor)
            })
    }
}

impl FromStr for Want {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (family, release) = text.split_once('-').unwrap_or((text, ""));
        let family = match family {
            "redis" => Family::Redis,
            "valkey" => Family::Valkey,
            _ => {
                return Err(format!(
                    "{text:?}: expected redis, valkey, redis-8.2, valkey-9.1, …"
                ));
            }
        };
        let release = if release.is_empty() {
            None
        } else {
            let version: Version = release
                .parse()
                .map_err(|()| format!("{text:?}: expected a release such as {family}-9.1"))?;
            Some((version.major, version.minor))
        };
        Ok(Self { family, release })
    }
}

impl fmt::Display for Want {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.release {
            Some((major, minor)) => write!(f, "{}-{major}.{minor}", self.family),
            None => write!(f, "{}", self.family),
        }
    }
}

/// Why no usable server binary was found.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FindError {
    /// No `redis-server` on `PATH`.
    #[error("`{program}` is not on PATH: {how}", how = HOW_TO_GET)]
    NotOnPath {
        /// The program looked for.
        program: &'static str,
    },
    /// A directory without a server.
    #[error("no redis-server or valkey-server in {}: {how}", .dir.display(), how = HOW_TO_GET)]
    NotInDir {
        /// The directory.
        dir: PathBuf,
    },
    /// The binary did not run.
    #[error("cannot run {} --version ({source}): {how}", .path.display(), how = HOW_TO_GET)]
    NotRunnable {
        /// The binary.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The binary ran but is no Redis-family server.
    #[error("{} --version printed {printed:?}: not a Redis or Valkey server", .path.display())]
    NotAServer {
        /// The binary.
        path: PathBuf,
        /// What it printed.
        printed: String,
    },
    /// The binary is another server than the one wanted.
    #[error(
        "{} is {found}, but {want} is wanted: put the {want} binaries first on PATH \
         (scripts/test.sh does), or name them",
        .path.display()
    )]
    Mismatch {
        /// The binary.
        path: PathBuf,
        /// What it is.
        found: Identity,
        /// What was wanted.
        want: Want,
    },
    /// A bad [`TEST_SERVER_VAR`].
    #[error("{var}={0}", var = TEST_SERVER_VAR)]
    BadWant(String),
}

/// The binaries to run: a server, and `redis-cli` when one is found (the
/// topologies need none; a test that reads `redis-cli --cluster check`
/// does). Sentinels run as the server with `--sentinel`, which every
/// Redis and Valkey server supports, so no `redis-sentinel` is needed.
#[derive(Debug, Clone)]
pub struct Binaries {
    server: PathBuf,
    cli: Option<PathBuf>,
    identity: Identity,
    want: Option<Want>,
}

impl Binaries {
    /// The server at `server`, as its `--version` describes it; `redis-cli`
    /// (or `valkey-cli`) beside it, else on `PATH`.
    pub fn at(server: impl Into<PathBuf>) -> Result<Self, FindError> {
        let server = server.into();
        let output = Command::new(&server)
            .arg("--version")
            .output()
            .map_err(|source| FindError::NotRunnable {
                path: server.clone(),
                source,
            })?;
        let printed = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        let identity = Identity::from_version_line(&printed).ok_or(FindError::NotAServer {
            path: server.clone(),
            printed,
        })?;
        let beside = server.parent().and_then(|dir| first_in(dir, CLIS));
        let cli = beside.or_else(|| on_path(CLIS));
        Ok(Self {
            server,
            cli,
            identity,
            want: None,
        })
    }

    /// The server in `dir`: its `redis-server`, else its `valkey-server`
    /// (a Valkey release names it so; `scripts/valkey.sh` makes a directory
    /// where `redis-server` is Valkey's).
    pub fn in_dir(dir: &Path) -> Result<Self, FindError> {
        let server = first_in(dir, SERVERS).ok_or_else(|| FindError::NotInDir {
            dir: dir.to_path_buf(),
        })?;
        Self::at(server)
    }

    /// The first `redis-server` on `PATH`.
    pub fn on_path() -> Result<Self, FindError> {
        let server = on_path(&["redis-server"]).ok_or(FindError::NotOnPath {
            program: "redis-server",
        })?;
        Self::at(server)
    }

    /// The first server on `PATH` (a `redis-server` or a `valkey-server`,
    /// each directory in turn) whose `--version` `admit` accepts.
    pub fn on_path_where(admit: impl Fn(&Identity) -> bool) -> Option<Self> {
        let paths = std::env::var_os("PATH")?;
        std::env::split_paths(&paths)
            .flat_map(|dir| SERVERS.iter().map(move |name| dir.join(name)))
            .filter(|path| path.is_file())
            .filter_map(|path| Self::at(path).ok())
            .find(|found| admit(&found.identity))
    }

    /// A test run's server: [`SERVER_BIN_VAR`] when set, else the first
    /// `redis-server` on `PATH`; wanted as [`TEST_SERVER_VAR`] says, when
    /// set.
    pub fn for_tests() -> Result<Self, FindError> {
        let found = match std::env::var_os(SERVER_BIN_VAR) {
            Some(path) if !path.is_empty() => Self::at(path)?,
            _ => Self::on_path()?,
        };
        match std::env::var(TEST_SERVER_VAR) {
            Ok(want) if !want.is_empty() => {
                found.expecting(want.parse().map_err(FindError::BadWant)?)
            }
            _ => Ok(found),
        }
    }

    /// These binaries, if they are the server `want` names; every process
    /// started from them is then checked again from its `INFO server`.
    pub fn expecting(mut self, want: Want) -> Result<Self, FindError> {
        if !want.admits(&self.identity) {
            return Err(FindError::Mismatch {
                path: self.server,
                found: self.identity,
                want,
            });
        }
        self.want = Some(want);
        Ok(self)
    }

    /// The server binary.
    pub fn server(&self) -> &Path {
        &self.server
    }

    /// `redis-cli`, if one was found.
    pub fn cli(&self) -> Result<&Path, FindError> {
        self.cli.as_deref().ok_or(FindError::NotOnPath {
            program: "redis-cli",
        })
    }

    /// What the server binary says it is.
    pub fn identity(&self) -> Identity {
        self.identity
    }

    /// The server every process must be, if one was named.
    pub fn want(&self) -> Option<Want> {
        self.want
    }
}

/// The names a server binary goes by, in the order a directory is searched.
const SERVERS: &[&str] = &["redis-server", "valkey-server"];

/// The names a command-line client goes by.
const CLIS: &[&str] = &["redis-cli", "valkey-cli"];

fn first_in(dir: &Path, names: &[&str]) -> Option<PathBuf> {
    names
        .iter()
        .map(|name| dir.join(name))
        .find(|path| path.is_file())
}

/// The first of `names` in the first directory of `PATH` that has one.
fn on_path(names: &[&str]) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths).find_map(|dir| first_in(&dir, names))
}

#[cfg(test)]
mod tests {
    use super::*;

    const REDIS_INFO: &str = "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:0\r\n";
    const VALKEY_INFO: &str =
        "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.1.8\r\n";

    #[test]
    fn info_server_names_the_family_and_its_own_release() {
        let redis = Identity::from_info(REDIS_INFO).expect("an identity");
        assert_eq!(redis.family, Family::Redis);
        assert_eq!(redis.version.to_string(), "7.0.15");
        let valkey = Identity::from_info(VALKEY_INFO).expect("an identity");
        assert_eq!(valkey.family, Family::Valkey);
        assert_eq!(valkey.to_string(), "Valkey 8.1.8");
        assert_eq!(Identity::from_info("# Sentinel\r\n"), None);
    }

    #[test]
    fn version_lines_of_both_families_parse() {
        let redis = Identity::from_version_line(
            "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=ae4d",
        );
        assert_eq!(
            redis.map(|id| id.to_string()).as_deref(),
            Some("Redis 7.0.15")
        );
        let valkey = Identity::from_version_line("Valkey server v=9.1.2 sha=0 malloc=libc");
        assert_eq!(
            valkey.map(|id| id.to_string()).as_deref(),
            Some("Valkey 9.1.2")
        );
        assert_eq!(Identity::from_version_line("redis-cli 7.0.15"), None);
    }

    #[test]
    fn a_want_admits_its_family_and_release_only() {
        let valkey_91 = Identity {
            family: Family::Valkey,
            version: "9.1.2".parse().expect("a version"),
        };
        let want: Want = "valkey-9.1".parse().expect("a want");
        assert!(want.admits(&valkey_91));
        assert_eq!(want.to_string(), "valkey-9.1");
        assert!(
            !"valkey-8.1"
                .parse::<Want>()
                .expect("a want")
                .admits(&valkey_91)
        );
        assert!("valkey".parse::<Want>().expect("a want").admits(&valkey_91));
        assert!(!"redis".parse::<Want>().expect("a want").admits(&valkey_91));
        assert!("keydb".parse::<Want>().is_err());
        assert!("redis-x".parse::<Want>().is_err());
    }

    #[test]
    fn a_directory_without_a_server_says_how_to_get_one() {
        let error = Binaries::in_dir(Path::new("/nonexistent-servers-dir")).expect_err("none");
        let text = error.to_string();
        assert!(text.contains("apt-get install redis-server"), "{text}");
        assert!(text.contains("REDIS_SERVER_BIN"), "{text}");
    }
}
