//! Blocking connections to a server, for readiness checks and fixture
//! commands.

use std::time::Duration;

/// A redis-rs command from its words.
///
/// # Panics
/// If `args` is empty: a command has a name.
pub fn command(args: &[&str]) -> redis::Cmd {
    let (name, rest) = args.split_first().expect("a command name");
    let mut command = redis::cmd(name);
    for arg in rest {
        command.arg(*arg);
    }
    command
}

/// Runs one command on a fresh blocking connection to `127.0.0.1:port`
/// (1 s to connect, 2 s for the reply) and converts the reply.
pub fn query_port<T: redis::FromRedisValue>(port: u16, args: &[&str]) -> redis::RedisResult<T> {
    let mut conn = connect(port)?;
    command(args).query(&mut conn)
}

/// A blocking connection to `127.0.0.1:port`: 1 s to connect, 2 s for
/// each reply.
pub fn connect(port: u16) -> redis::RedisResult<redis::Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let conn = client.get_connection_with_timeout(Duration::from_secs(1))?;
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    Ok(conn)
}
