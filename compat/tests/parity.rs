//! rlx-discover's loader and the RLX runtime's accept and refuse the same
//! cluster files, and read the same values from them: the runtime's own
//! `ClusterConfig::from_toml_str` is the judge, never a reading of it.

use rlx_compat::load_text;
use rlx_discover::ClusterConfig;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// What rlx-discover makes of `text`: `Ok` with each node's fields in the
/// runtime's rendering, or the error.
fn ours(text: &str) -> Result<Vec<[String; 8]>, String> {
    let c = ClusterConfig::parse(Path::new("cluster.toml"), text).map_err(|e| e.to_string())?;
    Ok(c.nodes
        .iter()
        .map(|n| {
            [
                n.addr.clone(),
                n.ssh.clone().unwrap_or_default(),
                n.ckpt_dir.clone(),
                n.device.as_str().to_string(),
                n.precision.as_str().to_string(),
                format!("{:?}", n.kv_cache).to_lowercase(),
                format!("{:?}", n.role).to_lowercase(),
                n.layers.clone().unwrap_or_default(),
            ]
        })
        .collect())
}

/// The runtime's reading of the same node fields.
fn theirs(v: &Value) -> Vec<[String; 8]> {
    let s = |n: &Value, k: &str| n[k].as_str().unwrap_or_default().to_string();
    v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            [
                s(n, "addr"),
                s(n, "ssh"),
                s(n, "ckpt_dir"),
                s(n, "device"),
                s(n, "precision"),
                s(n, "kv_cache"),
                s(n, "role"),
                s(n, "layers"),
            ]
        })
        .collect()
}

/// Asserts that both loaders agree on `text`: both accept it and read the
/// same nodes, or both refuse it.
fn agree(text: &str) {
    let rt = load_text(text);
    match (ours(text), rt["ok"] == true) {
        (Ok(nodes), true) => assert_eq!(nodes, theirs(&rt), "the nodes differ for:\n{text}"),
        (Err(_), false) => {}
        (Ok(_), false) => panic!(
            "rlx-discover accepts a file the runtime refuses ({}):\n{text}",
            rt["error"]
        ),
        (Err(e), true) => panic!("rlx-discover refuses a file the runtime accepts ({e}):\n{text}"),
    }
}

fn node(extra: &str) -> String {
    format!("model = \"m\"\n[[node]]\naddr = \"10.0.0.5:9100\"\nckpt_dir = \"/m\"\n{extra}\n")
}

#[test]
fn every_device_spelling_is_accepted_or_refused_as_the_runtime_does() {
    let names = [
        "cpu",
        "CPU",
        " cuda ",
        "nvidia",
        "metal",
        "mtl",
        "mlx",
        "ane",
        "coreml",
        "neural-engine",
        "rocm",
        "hip",
        "amd",
        "xdna",
        "aie",
        "aie2",
        "ryzenai",
        "ryzen-ai",
        "amdnpu",
        "egpu",
        "tbgpu",
        "thunderbolt",
        "oneapi",
        "levelzero",
        "level-zero",
        "l0",
        "intel",
        "sycl",
        "gpu",
        "wgpu",
        "vulkan",
        "vk",
        "opengl",
        "gl",
        "directx",
        "dx12",
        "d3d12",
        "webgpu",
        "tpu",
        "hexagon",
        "htp",
        "qnn",
        "metal+cpu",
        "cuda+cpu",
        "cuda + cpu",
        "cuda,cpu",
        "cuda;cpu",
        "cuda cpu",
        "cuda+cuda",
        "+",
        "",
        " ",
        "cuda:0",
        "cuda:0,cuda:1",
        "quantum",
        "cpu+quantum",
        "gpu0",
        "Metal+CPU",
        "cuda++cpu",
    ];
    for d in names {
        agree(&node(&format!("device = {d:?}")));
    }
    agree(&node("device = 3"));
}

#[test]
fn every_precision_spelling_is_accepted_or_refused_as_the_runtime_does() {
    let names = [
        "f32", "f16", "bf16", "mixed", "fp8", "fp8e5m2", "mxfp8", "nvfp4", "mxfp4", "int8", "q8_0",
        "f8e4m3", "f8e5m2", "f6e3m2", "f4e2m1", "f4e3m0", "f8", "f64", " bf16 ", "fp32", "fp16",
        "F32", "BF16", "i8", "f9", "f8e4", "f8m3", "fe4m3", "f8e4mx", "bf", "f8e4m", "f", "",
        "f12e5m6", "f8e04m3",
    ];
    for p in names {
        agree(&node(&format!("precision = {p:?}")));
    }
}

#[test]
fn every_other_node_field_is_read_as_the_runtime_reads_it() {
    for extra in [
        "kv_cache = \"none\"",
        "kv_cache = \"host\"",
        "kv_cache = \"device\"",
        "kv_cache = \"Host\"",
        "kv_cache = \"gpu\"",
        "kv_cache = { precision = \"int8\" }",
        "kv_cache = { max_tokens = 8 }",
        "role = \"active\"",
        "role = \"standby\"",
        "role = \"draining\"",
        "role = \"worker\"",
        "role = \"Active\"",
        "layers = \"0:12\"",
        "layers = \" 0 : 12 \"",
        "layers = \"junk\"",
        "layers = [0, 12]",
        "rng_seed = 7",
        "rng_seed = -1",
        "rng_seed = 1.5",
        "max_ram_gb = 40",
        "max_ram_gb = 40.5",
        "max_ram_gb = -1",
        "max_ram_gb = \"40\"",
        "ssh = \"gpu-a\"",
        "ssh = 5",
        "standby_for = \"10.0.0.6:9100\"",
        "devcie = \"cuda\"",
        "[node.extra]\nx = 1",
    ] {
        agree(&node(extra));
    }
    // Required fields and their types.
    agree("model = \"m\"\n[[node]]\naddr = \"a:1\"\n");
    agree("model = \"m\"\n[[node]]\nckpt_dir = \"/m\"\n");
    agree("model = \"m\"\n[[node]]\naddr = 9100\nckpt_dir = \"/m\"\n");
    agree("model = \"m\"\n[[node]]\naddr = \"gpu-a\"\nckpt_dir = \"/m\"\n");
    agree("model = \"m\"\nnode = [{ addr = \"a:1\", ckpt_dir = \"/m\" }]\n");
    agree("model = \"m\"\n[node]\naddr = \"a:1\"\nckpt_dir = \"/m\"\n");
}

#[test]
fn the_runtimes_top_level_keys_are_checked_with_the_runtimes_types() {
    for top in [
        "seq = 6",
        "seq = -1",
        "seq = \"6\"",
        "rng_seed = 42",
        "rng_seed = -42",
        "reserve_ram_gb = 6",
        "reserve_ram_gb = 6.5",
        "reserve_ram_gb = \"6\"",
        "title = \"anything else\"",
        "[placement]\npolicy = \"auto\"",
        "[placement]\npolicy = \"ram_balanced\"",
        "[placement]\npolicy = \"throughput\"",
        "[placement]\npolicy = \"manual\"",
        "[placement]\npolicy = \"fastest\"",
        "[placement]\nunknown = 1",
        "[placement.objective]\noptimize = \"latency\"\ncontext = 32768\nhop_secs = 0.002",
        "[placement.objective]\noptimize = \"speed\"",
        "[placement.objective]\non_unknown_kv = \"assume\"\nkv_dtype = \"f16\"",
        "[placement.objective]\non_unknown_kv = \"maybe\"",
        "[placement.objective]\nkv_bytes_per_layer_token = 2048",
        "[placement.objective]\nkv_bytes_per_layer_token = -1",
        "[placement.objective]\nprecision_ladder = [\"f16\", \"mxfp4\"]",
        "[placement.objective]\nprecision_ladder = [\"f16\", \"fp32\"]",
        "[placement.objective]\ncontext = \"long\"",
        "placement = 3",
    ] {
        agree(&format!("model = \"m\"\n{top}\n"));
    }
    agree("model = 5\n");
}

/// The `[discover]` keys both read: rlx-discover's stanza has more keys
/// (and refuses unknown ones, where the runtime ignores them), but on the
/// runtime's own keys the two agree.
#[test]
fn the_runtimes_discover_keys_are_read_alike() {
    for d in [
        "ssh_hosts = [\"a\", \"b\"]\nckpt_dir = \"/m\"",
        "ssh_hosts = \"a\"\nckpt_dir = \"/m\"",
        "subnet = \"10.0.0.0/24\"",
        "subnet = [\"10.0.0.0/24\"]",
        "port = 9100",
        "port = \"9100\"",
        "port = 70000",
        "device = \"metal+cpu\"",
        "device = \"cuda:0\"",
        "precision = \"f8e4m3\"",
        "precision = \"fp32\"",
        "timeout_ms = 300",
        "timeout_ms = -3",
    ] {
        agree(&format!("model = \"m\"\n[discover]\n{d}\n"));
    }
}

/// Where the runtime's crate keeps its own example and test fixtures, when
/// this machine has its source (cargo's registry cache).
fn registry_copy() -> Option<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
    let src = home.join("registry/src");
    std::fs::read_dir(src)
        .ok()?
        .flatten()
        .map(|d| {
            d.path()
                .join(format!("rlx-distributed-{}", rlx_compat::RUNTIME_VERSION))
        })
        .find(|p| p.is_dir())
}

fn fixtures() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/runtime");
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read_to_string(e.path()).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

/// The fixtures are the runtime's own files: its `cluster.example.toml`
/// and the TOML of its config tests, copied from the crate; a version bump
/// that changes them fails here until they are copied again.
#[test]
fn the_fixtures_are_the_runtimes_own_example_and_test_files() {
    let Some(src) = registry_copy() else {
        eprintln!(
            "SKIP the_fixtures_are_the_runtimes_own_example_and_test_files: the source of \
             rlx-distributed {} is not in cargo's registry cache here",
            rlx_compat::RUNTIME_VERSION
        );
        return;
    };
    let example = std::fs::read_to_string(src.join("cluster.example.toml")).unwrap();
    let config_rs = std::fs::read_to_string(src.join("src/cluster/config.rs")).unwrap();
    for (name, text) in fixtures() {
        if name == "cluster.example.toml" {
            assert_eq!(text, example, "{name} differs from the crate's");
        } else {
            let body = text.trim_start();
            assert!(
                config_rs.contains(body.trim_end()),
                "{name} is not a fixture of the crate's src/cluster/config.rs"
            );
        }
    }
}

/// The runtime's example and its config tests' files, good and bad, are
/// judged alike by rlx-discover and by the runtime.
#[test]
fn the_runtimes_example_and_fixtures_are_judged_alike() {
    let all = fixtures();
    assert!(all.len() >= 7, "{all:?}");
    for (name, text) in &all {
        let rt = load_text(text);
        let mine = ours(text);
        assert_eq!(
            mine.is_ok(),
            rt["ok"] == true,
            "{name}: rlx-discover {mine:?}, runtime {rt}"
        );
        agree(text);
    }
    for policy in ["auto", "ram_balanced", "throughput", "manual"] {
        agree(&format!(
            "model = \"m\"\n[placement]\npolicy = \"{policy}\"\n[[node]]\naddr=\"a:1\"\nckpt_dir=\"/m\"\n"
        ));
    }
}

/// The one place the two differ on purpose: a file without `model`.
/// The runtime refuses it; rlx-discover loads it (discovery often comes
/// before the model is chosen) and warns in the runtime's words.
#[test]
fn a_file_without_model_is_refused_by_the_runtime_and_warned_about_here() {
    let text = "[[node]]\naddr = \"a:1\"\nckpt_dir = \"/m\"\n";
    let rt = load_text(text);
    assert_eq!(rt["ok"], false);
    assert!(
        rt["error"]
            .as_str()
            .unwrap()
            .contains("missing field `model`"),
        "{rt}"
    );
    let c = ClusterConfig::parse(Path::new("c.toml"), text).unwrap();
    assert!(
        c.warnings
            .iter()
            .any(|w| w.message.contains("missing field `model`")),
        "{:?}",
        c.warnings
    );
}
