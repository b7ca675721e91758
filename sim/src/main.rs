//! The `sim` command line: runs scenario files across many seeds and says
//! whether each met its expectation.
//!
//! ```text
//! sim run [PATHS…] [--seeds N] [--seed S] [--shard I/N] [--jobs J] [--json FILE] [--junit FILE] [--report-dir DIR]
//! sim merge FILE… [--json FILE] [--junit FILE]
//! sim replay FILE --seed S [--history] [--report-dir DIR]
//! sim schema
//! sim reference
//! sim chaos [PATHS…] [--runs K] [--seed S] [--target redis://127.0.0.1:PORT] [--base-port P] [--junit FILE]
//! sim agree [PATHS…] --budget DURATION [--sim-seeds N] [--max-runs K] [--archive DIR]
//! sim agree --recheck DIR
//! ```
//!
//! `sim chaos` runs the same scenario files against real processes (see
//! `sim::chaos`); `chaos-client` and `chaos-exec` are its own children.
//! This file only turns arguments into calls of `sim::runner::cli`, which
//! runs either mode through the one seed runner (`sim::runner`).
#![warn(clippy::too_many_lines)]

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use sim::{
    chaos,
    runner::{
        self, RunOptions, Shard, Until,
        cli::{self, Outputs},
    },
};

/// The simulator allocates and frees small objects at a high rate (frames,
/// futures, history entries): under glibc's allocator about 15 % of a
/// scenario run's CPU was in `malloc` and `free`. Allocation addresses never
/// reach the simulation's behaviour, so replays stay byte-identical.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "sim",
    about = "Deterministic fault simulation of the Redis lock"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run scenario files (or directories of them) across their seeds.
    Run(RunArgs),
    /// Combine the --json results of every shard of a run into the table
    /// and exit code of the whole run.
    Merge {
        /// One --json file per shard.
        files: Vec<PathBuf>,
        /// Write the merged results here, as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Write the merged results here, as JUnit XML.
        #[arg(long)]
        junit: Option<PathBuf>,
    },
    /// Run scenario files against REAL processes on loopback
    /// (redis-server, redis-sentinel, a redis-cli-made cluster; each client
    /// its own OS process running the production adapter), applying the
    /// fault schedule the simulator draws for the same seeds, and check the
    /// real history with the same checkers. Faults real processes cannot
    /// take (a pause of the storage, a server fault against `--target`) are
    /// refused by name and file:line:col.
    Chaos {
        /// Scenario files or directories (default: scenarios/).
        paths: Vec<PathBuf>,
        /// Real runs per scenario: seeds 0..K.
        #[arg(long, default_value_t = 3)]
        runs: u64,
        /// Run only this seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Run against your own Redis (redis://127.0.0.1:PORT) instead of
        /// starting one: client-side faults only, others refused by name.
        #[arg(long)]
        target: Option<String>,
        /// Use ports from here up (each must be free) instead of letting
        /// the kernel pick free ones.
        #[arg(long)]
        base_port: Option<u16>,
        /// Write the results here, as JSON (the `sim run --json` schema).
        #[arg(long)]
        json: Option<PathBuf>,
        /// Write the results here, as JUnit XML: one testcase per file.
        #[arg(long)]
        junit: Option<PathBuf>,
        /// Where timeline reports of violations go.
        #[arg(long, default_value = "target/chaos-reports")]
        report_dir: PathBuf,
        /// Where the servers' logs and data go while a run lasts.
        #[arg(long, default_value = "target/chaos-work")]
        work_dir: PathBuf,
        /// Print each run's history as JSON lines.
        #[arg(long)]
        history: bool,
        /// Stop each scenario at its first failing seed (the lowest seed
        /// that shows what its expectation is about): the verdict without
        /// the rest of the budget, and the counts of the seeds up to it.
        #[arg(long)]
        stop_at_first_failure: bool,
        /// Where each `[server] flavour`'s server is: DIR/FLAVOUR/path/
        /// redis-server, as `scripts/servers.sh FLAVOUR` makes it (Redis
        /// 7.0 may also come from PATH).
        #[arg(long, default_value = "target/servers")]
        servers: PathBuf,
        /// Append the pid of every process the run starts to this file
        /// (for tests that check none is left).
        #[arg(long, hide = true)]
        pids_file: Option<PathBuf>,
        /// How partitions are made: `kernel` (iptables rules in the run's
        /// own network namespace, where the machine allows one; else the
        /// proxies, and the summary says why) or `proxies` (the
        /// controller's proxies, in the machine's own network).
        #[arg(long, value_enum, default_value_t = NetworkArg::Kernel)]
        network: NetworkArg,
        /// Plant a bug (repeatable): a positive control, whose property
        /// must then fire (`sim_it::chaos` runs each). The summary names
        /// every plant; a planted run is never evidence for the lock.
        #[arg(long = "plant", value_enum)]
        plants: Vec<chaos::plant::Plant>,
    },
    /// The agreement table between the simulator and real processes: each
    /// file's simulated rate over --sim-seeds seeds; from it, K real runs
    /// (an unsafe file: enough that an equal real rate shows with 95 %
    /// probability; a safe file: what the budget leaves); both rates with
    /// Wilson intervals and a Fisher test per row; and an archive (the
    /// commit, the command, every real history, the table) from which
    /// `--recheck DIR` recomputes it.
    Agree(AgreeArgs),
    /// (internal) A chaos client process.
    #[command(hide = true)]
    ChaosClient {
        /// Its arguments, as JSON.
        args: String,
    },
    /// (internal) Arms the death signal, then runs PROGRAM.
    #[command(hide = true)]
    ChaosExec {
        /// The program.
        program: String,
        /// Its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Print the JSON Schema (draft-07) of scenario files, for editors
    /// (taplo, Even Better TOML) to validate and complete a file that
    /// starts with a `#:schema` line. The parser stays the judge.
    Schema,
    /// Print the scenario file reference (Markdown: every key with its
    /// type, default and unit, and every names table), as kept in
    /// docs/scenarios.md.
    Reference,
    /// Re-run one seed of one scenario exactly.
    Replay {
        /// The scenario file.
        file: PathBuf,
        /// The seed.
        #[arg(long)]
        seed: u64,
        /// Print the history as JSON lines.
        #[arg(long)]
        history: bool,
        /// Where the timeline report goes.
        #[arg(long, default_value = "target/sim-reports")]
        report_dir: PathBuf,
    },
}

/// `sim run`'s arguments.
#[derive(clap::Args)]
struct RunArgs {
    /// Scenario files or directories (default: scenarios/).
    paths: Vec<PathBuf>,
    /// Seeds per scenario (default: each file's `seeds`).
    #[arg(long)]
    seeds: Option<u64>,
    /// Run only this seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Run shard I of N (1-based): the seeds s with s mod N = I - 1 of
    /// every scenario. `sim merge` combines the shards' --json files.
    #[arg(long)]
    shard: Option<Shard>,
    /// Parallel workers (default: available cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Write the results here, as JSON (what `sim merge` reads).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the results here, as JUnit XML: one testcase per file.
    #[arg(long)]
    junit: Option<PathBuf>,
    /// Where timeline reports of violations go.
    #[arg(long, default_value = "target/sim-reports")]
    report_dir: PathBuf,
    /// Stop each scenario at its first failing seed (the lowest seed
    /// that shows what its expectation is about): the verdict without
    /// the rest of the budget, and the counts of the seeds up to it.
    #[arg(long)]
    stop_at_first_failure: bool,
}

/// `sim agree`'s arguments.
#[derive(clap::Args)]
struct AgreeArgs {
    /// Scenario files or directories (default: scenarios/).
    paths: Vec<PathBuf>,
    /// What the real runs may take in all, planned from each run's length
    /// (`90m`, `2h`); required unless --recheck.
    #[arg(long, value_parser = humantime::parse_duration)]
    budget: Option<std::time::Duration>,
    /// Simulated seeds per file.
    #[arg(long, default_value_t = 1500)]
    sim_seeds: u64,
    /// The most real runs a file gets.
    #[arg(long, default_value_t = 60)]
    max_runs: u64,
    /// Parallel workers for the simulated seeds (default: available cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// The archive directory to create (new or empty; default:
    /// target/agree/ and the start time).
    #[arg(long)]
    archive: Option<PathBuf>,
    /// Recompute the table of the archive in DIR from it alone, and say
    /// whether it matches.
    #[arg(long, conflicts_with_all = ["budget", "archive"])]
    recheck: Option<PathBuf>,
    /// Fill the last column of FILE's guarantees table (after its line
    /// `<!-- agreement: DIR -->`) from the archive --from names, or the
    /// one the line names.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["budget", "archive", "recheck"])]
    readme: Option<PathBuf>,
    /// With --readme: the archive to fill it from.
    #[arg(long, value_name = "DIR", requires = "readme")]
    from: Option<PathBuf>,
    /// With --readme: change nothing; exit 1 if the column is not what
    /// its archive says.
    #[arg(long, requires = "readme")]
    check: bool,
    /// Where each `[server] flavour`'s server is (as for `sim chaos`).
    #[arg(long, default_value = "target/servers")]
    servers: PathBuf,
    /// How the real runs' partitions are made (as for `sim chaos`).
    #[arg(long, value_enum, default_value_t = NetworkArg::Kernel)]
    network: NetworkArg,
    /// Where the servers' logs and data go while a run lasts.
    #[arg(long, default_value = "target/chaos-work")]
    work_dir: PathBuf,
    /// Use ports from here up (each must be free).
    #[arg(long)]
    base_port: Option<u16>,
}

impl AgreeArgs {
    fn run(self) -> ExitCode {
        let jobs = self.jobs.unwrap_or_else(runner::available_jobs).max(1);
        if let Some(dir) = self.recheck {
            return runner::agree::recheck(&dir, jobs);
        }
        if let Some(readme) = self.readme {
            return runner::agree::readme(&readme, self.from.as_deref(), self.check);
        }
        let Some(budget) = self.budget else {
            eprintln!(
                "error: sim agree needs --budget DURATION (what the real runs may take, e.g. 90m), or --recheck DIR"
            );
            return ExitCode::from(2);
        };
        let options = runner::agree::AgreeOptions {
            budget,
            sim_seeds: self.sim_seeds,
            max_runs: self.max_runs.max(1),
            jobs,
            real: chaos::RealOptions {
                target: chaos::Target::Started,
                base_port: self.base_port,
                work_dir: self.work_dir,
                pids_file: None,
                servers: self.servers,
                network: chaos::netns::enter(self.network.into()),
                // The agreement table is evidence: nothing is planted.
                plants: Vec::new(),
            },
            archive: self
                .archive
                .unwrap_or_else(|| runner::agree::default_archive(std::time::SystemTime::now())),
            // As typed, but for the program's own path (a machine's).
            command: std::iter::once("sim".to_owned())
                .chain(std::env::args().skip(1))
                .collect::<Vec<_>>()
                .join(" "),
        };
        cli::agree(self.paths, &options)
    }
}

impl RunArgs {
    fn run(self) -> ExitCode {
        let options = RunOptions {
            seeds: self.seeds,
            only_seed: self.seed,
            shard: self.shard.unwrap_or(Shard::WHOLE),
            jobs: self.jobs.unwrap_or_else(runner::available_jobs).max(1),
            report_dir: Some(self.report_dir),
            until: until(self.stop_at_first_failure),
            ..RunOptions::default()
        };
        let outputs = Outputs {
            json: self.json.as_deref(),
            junit: self.junit.as_deref(),
        };
        cli::run(self.paths, &options, outputs)
    }
}

/// `--network`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum NetworkArg {
    /// iptables rules in the run's own network namespace, where allowed.
    Kernel,
    /// The controller's proxies, in the machine's own network.
    Proxies,
}

impl From<NetworkArg> for chaos::netns::Want {
    fn from(network: NetworkArg) -> Self {
        match network {
            NetworkArg::Kernel => Self::Kernel,
            NetworkArg::Proxies => Self::Proxies,
        }
    }
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Run(args) => args.run(),
        Command::Agree(args) => args.run(),
        Command::Merge { files, json, junit } => cli::merge_files(
            &files,
            Outputs {
                json: json.as_deref(),
                junit: junit.as_deref(),
            },
        ),
        Command::Chaos {
            paths,
            runs,
            seed,
            target,
            base_port,
            json,
            junit,
            report_dir,
            work_dir,
            history,
            pids_file,
            servers,
            stop_at_first_failure,
            network,
            plants,
        } => {
            let target = match target.as_deref().map(chaos::Target::parse_url) {
                None => chaos::Target::Started,
                Some(Ok(target)) => target,
                Some(Err(error)) => {
                    eprintln!("error: {error}");
                    return ExitCode::from(2);
                }
            };
            // A user's Redis is in the machine's network: the run stays
            // there too.
            let network = if matches!(target, chaos::Target::Started) {
                chaos::netns::enter(network.into())
            } else {
                chaos::netns::Network::Proxies("--target: the Redis is the machine's".to_owned())
            };
            let options = chaos::RealOptions {
                target,
                base_port,
                work_dir,
                pids_file,
                servers,
                network,
                plants,
            };
            let seeds: Vec<u64> = seed.map_or_else(|| (0..runs).collect(), |seed| vec![seed]);
            cli::chaos(
                paths,
                &seeds,
                options,
                &report_dir,
                Outputs {
                    json: json.as_deref(),
                    junit: junit.as_deref(),
                },
                history,
                until(stop_at_first_failure),
            )
        }
        Command::ChaosClient { args } => match chaos::client::main(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: {error}");
                ExitCode::from(2)
            }
        },
        Command::ChaosExec { program, args } => {
            let error = chaos::procs::exec_child(&program, &args);
            eprintln!("error: cannot run {program}: {error}");
            ExitCode::from(127)
        }
        Command::Replay {
            file,
            seed,
            history,
            report_dir,
        } => cli::replay(&file, seed, history, &report_dir),
        Command::Schema => cli::schema(),
        Command::Reference => {
            sim::runner::output::emit(&sim::scenario::reference::markdown());
            ExitCode::SUCCESS
        }
    }
}

/// How far each scenario's seeds run, from `--stop-at-first-failure`.
fn until(stop_at_first_failure: bool) -> Until {
    if stop_at_first_failure {
        Until::FirstFailure
    } else {
        Until::EverySeed
    }
}
