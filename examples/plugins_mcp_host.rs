//! A minimal IDE-side host for plugin tools in Qwen Code (used by
//! `tests/e2e/run_mcp_e2e.sh`): installs plugin folders, runs a
//! `PluginHost` and its `PluginMcpServer`, registers the
//! `qwen-companion-plugins` entry in the user's Qwen settings, and prints
//! one JSON line per event on stdout.
//!
//! ```text
//! plugins_mcp_host --bridge PATH --workspace DIR [--install PLUGIN_DIR]...
//!                  [--always-load-tools] [--settings FILE]
//! ```
//!
//! Commands on stdin, one a line: `disable ID`, `enable ID`, `stop` (stops
//! the server: its lock file goes), `quit`. EOF = quit. The entry is left
//! in the settings file (as an IDE leaves it between runs).

use std::io::BufRead;
use std::path::PathBuf;
use std::sync::Arc;

use qwen_companion::mcp_bridge::naming::SERVER_NAME;
use qwen_companion::mcp_bridge::server::Config;
use qwen_companion::mcp_bridge::settings::{self, Scope};
use qwen_companion::mcp_bridge::PluginMcpServer;
use qwen_companion::plugins::host::{self, PluginHost};
use qwen_companion::plugins::install;
use serde_json::json;

fn die(message: &str) -> ! {
    println!("{}", json!({"event": "error", "message": message}));
    eprintln!("plugins_mcp_host: {message}");
    std::process::exit(1);
}

fn main() {
    let mut bridge = None;
    let mut workspace = None;
    let mut installs = Vec::new();
    let mut always_load = false;
    let mut settings_file = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--bridge" => bridge = args.next().map(PathBuf::from),
            "--workspace" => workspace = args.next(),
            "--install" => installs.extend(args.next().map(PathBuf::from)),
            "--always-load-tools" => always_load = true,
            "--settings" => settings_file = args.next().map(PathBuf::from),
            other => die(&format!("unknown argument {other:?}")),
        }
    }
    let bridge = bridge.unwrap_or_else(|| die("--bridge PATH is required"));
    let workspace = workspace.unwrap_or_else(|| die("--workspace DIR is required"));
    let plugins_dir = install::default_dir().unwrap_or_else(|e| die(&e.to_string()));
    for src in &installs {
        if let Err(e) = install::install_from(&plugins_dir, src) {
            die(&format!("install {}: {e}", src.display()));
        }
    }
    let config = host::Config {
        plugins_dir: Some(plugins_dir),
        workspace_root: Some(workspace.clone()),
        ..host::Config::default()
    };
    let host = Arc::new(PluginHost::new(config).unwrap_or_else(|e| die(&e.message)));
    let server = PluginMcpServer::start(
        host.clone(),
        Config {
            workspace_paths: vec![workspace],
            ..Config::default()
        },
    )
    .unwrap_or_else(|e| die(&e.message));
    let settings_path = settings_file.unwrap_or_else(|| {
        settings::settings_path(Scope::User, std::path::Path::new("/"))
            .unwrap_or_else(|e| die(&e.message))
    });
    let mut entry = json!({
        "command": bridge,
        "args": ["plugins"],
        "description": "Tools of the plugins installed in your IDE (qwen-companion)",
    });
    if always_load {
        entry["alwaysLoadTools"] = json!(true);
    }
    if let Err(e) = settings::register(&settings_path, SERVER_NAME, &entry) {
        die(&e.message);
    }
    let tools: Vec<String> = server
        .tools()
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect();
    println!(
        "{}",
        json!({"event": "ready", "port": server.port().unwrap_or(0),
            "lockFile": server.lock_file_path().ok(), "settings": settings_path,
            "tools": tools, "plugins": host.plugin_ids()})
    );
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let mut words = line.split_whitespace();
        let result = match (words.next(), words.next()) {
            (Some("disable"), Some(id)) => host.disable(id),
            (Some("enable"), Some(id)) => host.enable(id),
            (Some("stop"), None) => server.stop(),
            (Some("quit"), None) => break,
            (None, _) => continue,
            _ => {
                println!(
                    "{}",
                    json!({"event": "error", "message": format!("bad command {line:?}")})
                );
                continue;
            }
        };
        match result {
            Ok(()) => println!("{}", json!({"event": "done", "command": line})),
            Err(e) => println!(
                "{}",
                json!({"event": "error", "command": line, "message": e.message})
            ),
        }
    }
    drop(server);
    host.shutdown();
}
