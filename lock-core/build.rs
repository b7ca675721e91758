//! Computes the SHA1 of each Lua script at build time, so that every
//! `EVALSHA` digest is a constant that can never drift from the script text.
//! The lock family's scripts are sent as `family_prelude.lua` followed by
//! their own file: their digest is that of the two together.

use std::{env, fs, path::Path};

fn read(path: &str) -> String {
    println!("cargo::rerun-if-changed={path}");
    fs::read_to_string(path).expect("the Lua scripts ship with the crate")
}

fn sha1_of(source: &str) -> String {
    sha1_smol::Sha1::from(source.as_bytes())
        .digest()
        .to_string()
}

fn main() {
    let out_dir = env::var("OUT_DIR").expect("cargo sets OUT_DIR for build scripts");
    let mut generated = format!(
        "/// SHA1 of `lock.lua`, as `EVALSHA` expects it.\npub(crate) const LOCK_SHA1: &str = \"{}\";\n",
        sha1_of(&read("src/scripts/lock.lua"))
    );
    let prelude = read("src/scripts/family_prelude.lua");
    for (name, file) in [
        ("FAIR", "fair.lua"),
        ("RWLOCK", "rwlock.lua"),
        ("SEMAPHORE", "semaphore.lua"),
    ] {
        let body = read(&format!("src/scripts/{file}"));
        let digest = sha1_of(&format!("{prelude}{body}"));
        generated.push_str(&format!(
            "/// SHA1 of `family_prelude.lua` followed by `{file}`.\npub(crate) const {name}_SHA1: &str = \"{digest}\";\n"
        ));
    }
    fs::write(Path::new(&out_dir).join("script_sha1.rs"), generated).expect("OUT_DIR is writable");
}
