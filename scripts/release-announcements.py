#!/usr/bin/env python3
"""The announced release, native against the script, in the simulator.

On Valkey 9 a plain lock's release is `DELIFEQ` with its `PUBLISH` pipelined
behind it, so it announces even a release that deleted nothing; the script
it replaced publishes only when it deleted the caller's key. Valkey 8.1 and
9.1 differ, in the simulator as on the real servers, by `DELIFEQ` alone, so
each scenario file is run twice, as valkey-8.1 (the script's release) and as
valkey-9.1 (the native one), on the same seeds, and the histories are
compared: grants, releases by outcome (each that did not delete is one more
announcement, and one more wake-up per waiter, with the native release), and
the handoff (a release, then the next grant to a client that was waiting
before it: the median gap).

Usage: scripts/release-announcements.py SIM SEEDS FILE...
  SIM    the sim binary (target/release/sim, say)
"""
import json, os, re, statistics, subprocess, sys, tempfile


def twin(path, flavour, into):
    text = open(path).read()
    if re.search(r"^\[server\]", text, re.M):
        if re.search(r"^flavour\s*=", text, re.M):
            text = re.sub(r"^flavour\s*=.*$", f'flavour = "{flavour}"', text, flags=re.M)
        else:
            text = re.sub(r"^\[server\]\s*$", f'[server]\nflavour = "{flavour}"', text, flags=re.M)
    else:
        first = re.search(r"^\[", text, re.M)
        text = text[: first.start()] + f'[server]\nflavour = "{flavour}"\n\n' + text[first.start():]
    out = os.path.join(into, flavour + "-" + os.path.basename(path))
    open(out, "w").write(text)
    return out


def measure(sim, path, seeds, reports):
    grants, outcomes, gaps = 0, {}, []
    for seed in range(seeds):
        run = subprocess.run([sim, "replay", path, "--seed", str(seed), "--history", "--report-dir", reports],
                             capture_output=True, text=True)
        waiting, last = {}, None
        for line in run.stdout.splitlines():
            if not line.startswith("{"):
                continue
            entry = json.loads(line)
            process = entry["process"]
            if not isinstance(process, dict) or "client" not in process:
                continue
            client, op = process["client"], entry["op"]
            at = entry["at"]["secs"] + entry["at"]["nanos"] / 1e9
            if op == "waiting":
                waiting[client] = at
            elif op == "release-ok":
                outcomes[entry["outcome"]] = outcomes.get(entry["outcome"], 0) + 1
                last = (at, client)
            elif op == "acquire-ok":
                grants += 1
                if client in waiting and last and last[1] != client and waiting[client] < last[0]:
                    gaps.append(at - last[0])
                waiting.pop(client, None)
                last = None
    return grants, outcomes, gaps


def main():
    sim, seeds, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    print("| file | release | grants | releases | deleted nothing (per grant) | handoffs | median handoff |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as into:
        for path in files:
            for flavour, how in (("valkey-8.1", "script"), ("valkey-9.1", "native")):
                grants, outcomes, gaps = measure(sim, twin(path, flavour, into), seeds, into)
                nothing = sum(v for k, v in outcomes.items() if k != "Deleted")
                median = f"{statistics.median(gaps) * 1000:.0f} ms" if gaps else "–"
                per = nothing / grants if grants else 0.0
                print(f"| `{os.path.basename(path)[:-5]}` | {how} | {grants} | {sum(outcomes.values())} "
                      f"| {nothing} ({per:.3f}) | {len(gaps)} | {median} |")


if __name__ == "__main__":
    main()
