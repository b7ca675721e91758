//! Computes the SHA1 of each Lua script at build time, so that `EVALSHA`
//! digests are constants that can never drift from the script text.

use std::{env, fs, path::Path};

fn main() {
    let out_dir = env::var("OUT_DIR").expect("cargo sets OUT_DIR for build scripts");
    let mut generated = String::new();
    for name in ["acquire", "renew", "release"] {
        let path = format!("src/scripts/{name}.lua");
        println!("cargo::rerun-if-changed={path}");
        let source = fs::read_to_string(&path).expect("the Lua scripts ship with the crate");
        let digest = sha1_smol::Sha1::from(source.as_bytes())
            .digest()
            .to_string();
        generated.push_str(&format!(
            "/// SHA1 of `{name}.lua`, as `EVALSHA` expects it.\npub(crate) const {}_SHA1: &str = \"{digest}\";\n",
            name.to_uppercase()
        ));
    }
    fs::write(Path::new(&out_dir).join("script_sha1.rs"), generated).expect("OUT_DIR is writable");
}
