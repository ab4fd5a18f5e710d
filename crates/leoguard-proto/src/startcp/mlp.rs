//! StarTCP's learnt lead (§2.2): the actor of an actor-critic agent trained offline (in Python),
//! evaluated here in pure Rust from a JSON weights file. Only the actor's mean action is needed at
//! inference; the critic stays with the trainer.
//!
//! # Weights file (`format` "leoguard-startcp-policy", `version` 1)
//!
//! ```json
//! {
//!   "format": "leoguard-startcp-policy",
//!   "version": 1,
//!   "inputs": ["mean_rtt_ms", "rtt_var_ms2", "ack_rate_mbps", "owd_ms", "time_to_handover_ms"],
//!   "input_mean": [m0, m1, m2, m3, m4],
//!   "input_scale": [s0, s1, s2, s3, s4],
//!   "layers": [
//!     {"w": [[...5 numbers...], ... 32 rows], "b": [...32...], "activation": "tanh"},
//!     {"w": [[...32...], ... 16 rows], "b": [...16...], "activation": "tanh"},
//!     {"w": [[...16...]], "b": [b], "activation": "linear"}
//!   ],
//!   "output": {"scale_ms": 100.0, "max_lead_ms": 500.0},
//!   "meta": {"anything": "the trainer likes, ignored"}
//! }
//! ```
//!
//! - `inputs` must be exactly [`FEATURES`] in that order (units in [`LeadState::features`]); the
//!   network sees `x[i] = (feature[i] - input_mean[i]) / input_scale[i]` (`input_scale` > 0). The
//!   normalisation lives in the file so trainer and sender cannot disagree.
//! - Each layer computes `act(W x + b)`; `w` has one row per output of `len(x)` numbers (PyTorch's
//!   `nn.Linear.weight` layout, so `layer.weight.tolist()` writes it). Activations: `tanh`, `relu`,
//!   `linear`. The last layer has one output `y`.
//! - lead = clamp(`y * scale_ms`, 0, `max_lead_ms`) milliseconds (`scale_ms` > 0, `max_lead_ms` >= 0);
//!   the sender clamps again to its own `max_lead`. A non-finite `y` gives `max_lead_ms`.
//! - At most 16 layers of at most 1024 units. Every number must be finite (JSON has no NaN; a policy
//!   built in code is checked the same way). Keys other than these and `meta` are errors (a typo is
//!   not silently ignored).
//!
//! Every defect is a [`PolicyError`] naming the field (`layers[1].w[3][0]`), never a panic.

use super::policy::{LeadPolicy, LeadState, FEATURES};
use leoguard_core::Duration;
use serde_json::{json, Map, Value};
use std::path::Path;

/// The `format` string of a weights file.
pub const POLICY_FORMAT: &str = "leoguard-startcp-policy";
/// The `version` this code reads.
pub const POLICY_VERSION: u64 = 1;
/// Most layers accepted.
const MAX_LAYERS: usize = 16;
/// Most units per layer accepted.
const MAX_WIDTH: usize = 1024;
/// Top-level keys of a weights file.
const KEYS: [&str; 8] = ["format", "version", "inputs", "input_mean", "input_scale", "layers", "output", "meta"];

/// A weights file or policy that cannot be used.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    #[error("cannot read policy file {path}: {reason}")]
    Io {
        /// The path.
        path: String,
        /// The operating system's reason.
        reason: String,
    },
    /// The text is not JSON (truncated, corrupt); the reason gives line and column.
    #[error("policy file is not valid JSON: {0}")]
    Json(String),
    /// A field is missing, of the wrong type or out of range.
    #[error("policy field {field}: {reason}")]
    Field {
        /// The field's path, e.g. `layers[1].w[3][0]`.
        field: String,
        /// What is wrong.
        reason: String,
    },
}

fn field_err(field: impl Into<String>, reason: impl Into<String>) -> PolicyError {
    PolicyError::Field { field: field.into(), reason: reason.into() }
}

/// A layer's activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// tanh.
    Tanh,
    /// max(0, x).
    Relu,
    /// The identity.
    Linear,
}

impl Activation {
    /// The name in a weights file.
    pub fn name(self) -> &'static str {
        match self {
            Activation::Tanh => "tanh",
            Activation::Relu => "relu",
            Activation::Linear => "linear",
        }
    }

    /// The activation called `name`.
    pub fn from_name(name: &str) -> Option<Activation> {
        match name {
            "tanh" => Some(Activation::Tanh),
            "relu" => Some(Activation::Relu),
            "linear" => Some(Activation::Linear),
            _ => None,
        }
    }

    fn apply(self, x: f64) -> f64 {
        match self {
            Activation::Tanh => x.tanh(),
            Activation::Relu => x.max(0.0),
            Activation::Linear => x,
        }
    }
}

/// One fully connected layer: `act(W x + b)`, `w` with one row per output.
#[derive(Clone, Debug, PartialEq)]
pub struct MlpLayer {
    /// Weights, one row of `n_in` numbers per output.
    pub w: Vec<Vec<f64>>,
    /// Biases, one per output.
    pub b: Vec<f64>,
    /// Activation.
    pub activation: Activation,
}

/// The learnt lead policy: an MLP from [`LeadState::features`] to the lead (see the module docs).
#[derive(Clone, Debug)]
pub struct MlpPolicy {
    input_mean: [f64; 5],
    input_scale: [f64; 5],
    layers: Vec<MlpLayer>,
    scale_ms: f64,
    max_lead_ms: f64,
    /// Scratch buffers, so an evaluation allocates nothing.
    buf: [Vec<f64>; 2],
}

fn finite(x: f64, field: impl FnOnce() -> String) -> Result<f64, PolicyError> {
    if x.is_finite() {
        Ok(x)
    } else {
        Err(field_err(field(), format!("{x} is not a finite number")))
    }
}

impl MlpPolicy {
    /// A policy from its parts, checked as a weights file is (field names as in the file).
    pub fn new(
        input_mean: [f64; 5],
        input_scale: [f64; 5],
        layers: Vec<MlpLayer>,
        scale_ms: f64,
        max_lead_ms: f64,
    ) -> Result<Self, PolicyError> {
        for i in 0..5 {
            finite(input_mean[i], || format!("input_mean[{i}]"))?;
            if finite(input_scale[i], || format!("input_scale[{i}]"))? <= 0.0 {
                return Err(field_err(format!("input_scale[{i}]"), format!("{} must be > 0", input_scale[i])));
            }
        }
        if layers.is_empty() || layers.len() > MAX_LAYERS {
            return Err(field_err("layers", format!("{} layers, need 1 to {MAX_LAYERS}", layers.len())));
        }
        let mut n_in = FEATURES.len();
        for (l, layer) in layers.iter().enumerate() {
            let n_out = layer.w.len();
            if n_out == 0 || n_out > MAX_WIDTH {
                return Err(field_err(format!("layers[{l}].w"), format!("{n_out} rows, need 1 to {MAX_WIDTH}")));
            }
            for (r, row) in layer.w.iter().enumerate() {
                if row.len() != n_in {
                    let what =
                        if l == 0 { "the 5 inputs".to_string() } else { format!("layer {}'s {n_in} outputs", l - 1) };
                    return Err(field_err(
                        format!("layers[{l}].w[{r}]"),
                        format!("{} numbers, expected {n_in} ({what})", row.len()),
                    ));
                }
                for (c, &x) in row.iter().enumerate() {
                    finite(x, || format!("layers[{l}].w[{r}][{c}]"))?;
                }
            }
            if layer.b.len() != n_out {
                return Err(field_err(
                    format!("layers[{l}].b"),
                    format!("{} numbers, expected {n_out} (one per row of w)", layer.b.len()),
                ));
            }
            for (k, &x) in layer.b.iter().enumerate() {
                finite(x, || format!("layers[{l}].b[{k}]"))?;
            }
            n_in = n_out;
        }
        if n_in != 1 {
            return Err(field_err(
                format!("layers[{}].w", layers.len() - 1),
                format!("{n_in} outputs, the last layer needs 1"),
            ));
        }
        if finite(scale_ms, || "output.scale_ms".into())? <= 0.0 {
            return Err(field_err("output.scale_ms", format!("{scale_ms} must be > 0")));
        }
        if finite(max_lead_ms, || "output.max_lead_ms".into())? < 0.0 {
            return Err(field_err("output.max_lead_ms", format!("{max_lead_ms} must be >= 0")));
        }
        let width = layers.iter().map(|l| l.w.len()).max().unwrap_or(1).max(FEATURES.len());
        Ok(MlpPolicy {
            input_mean,
            input_scale,
            layers,
            scale_ms,
            max_lead_ms,
            buf: [Vec::with_capacity(width), Vec::with_capacity(width)],
        })
    }

    /// Reads a weights file.
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| PolicyError::Io { path: path.display().to_string(), reason: e.to_string() })?;
        Self::from_json(&text)
    }

    /// Parses a weights file's text.
    pub fn from_json(text: &str) -> Result<Self, PolicyError> {
        let v: Value = serde_json::from_str(text).map_err(|e| PolicyError::Json(e.to_string()))?;
        let Value::Object(top) = v else {
            return Err(field_err("(top level)", "must be a JSON object"));
        };
        if let Some(k) = top.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(field_err(k.clone(), format!("unknown field (known: {})", KEYS.join(", "))));
        }
        match get(&top, "format", "")? {
            Value::String(s) if s == POLICY_FORMAT => {}
            other => return Err(field_err("format", format!("{other} is not \"{POLICY_FORMAT}\""))),
        }
        let version = get(&top, "version", "")?;
        if version.as_u64() != Some(POLICY_VERSION) {
            return Err(field_err("version", format!("{version} is not {POLICY_VERSION}")));
        }
        let inputs = array(get(&top, "inputs", "")?, "inputs")?;
        let names: Vec<&str> = inputs.iter().map(|x| x.as_str().unwrap_or("<not a string>")).collect();
        if names != FEATURES {
            return Err(field_err("inputs", format!("{names:?} must be exactly {FEATURES:?}")));
        }
        let input_mean = vec5(get(&top, "input_mean", "")?, "input_mean")?;
        let input_scale = vec5(get(&top, "input_scale", "")?, "input_scale")?;
        let mut layers = Vec::new();
        let raw = array(get(&top, "layers", "")?, "layers")?;
        if raw.len() > MAX_LAYERS {
            return Err(field_err("layers", format!("{} layers, need 1 to {MAX_LAYERS}", raw.len())));
        }
        for (l, layer) in raw.iter().enumerate() {
            let path = format!("layers[{l}]");
            let Value::Object(obj) = layer else {
                return Err(field_err(path, "must be an object with w, b and activation"));
            };
            if let Some(k) = obj.keys().find(|k| !["w", "b", "activation"].contains(&k.as_str())) {
                return Err(field_err(format!("{path}.{k}"), "unknown field (known: w, b, activation)"));
            }
            let rows = array(get(obj, "w", &path)?, &format!("{path}.w"))?;
            if rows.len() > MAX_WIDTH {
                return Err(field_err(format!("{path}.w"), format!("{} rows, need 1 to {MAX_WIDTH}", rows.len())));
            }
            let w = rows
                .iter()
                .enumerate()
                .map(|(r, row)| numbers(row, &format!("{path}.w[{r}]")))
                .collect::<Result<Vec<_>, _>>()?;
            let b = numbers(get(obj, "b", &path)?, &format!("{path}.b"))?;
            let act = get(obj, "activation", &path)?;
            let activation = act.as_str().and_then(Activation::from_name).ok_or_else(|| {
                field_err(format!("{path}.activation"), format!("{act} is not \"tanh\", \"relu\" or \"linear\""))
            })?;
            layers.push(MlpLayer { w, b, activation });
        }
        let Value::Object(out) = get(&top, "output", "")? else {
            return Err(field_err("output", "must be an object with scale_ms and max_lead_ms"));
        };
        if let Some(k) = out.keys().find(|k| !["scale_ms", "max_lead_ms"].contains(&k.as_str())) {
            return Err(field_err(format!("output.{k}"), "unknown field (known: scale_ms, max_lead_ms)"));
        }
        let scale_ms = number(get(out, "scale_ms", "output")?, "output.scale_ms")?;
        let max_lead_ms = number(get(out, "max_lead_ms", "output")?, "output.max_lead_ms")?;
        MlpPolicy::new(input_mean, input_scale, layers, scale_ms, max_lead_ms)
    }

    /// The weights file text of this policy (what [`MlpPolicy::from_json`] reads back exactly).
    pub fn to_json(&self) -> String {
        let layers: Vec<Value> =
            self.layers.iter().map(|l| json!({"w": l.w, "b": l.b, "activation": l.activation.name()})).collect();
        let v = json!({
            "format": POLICY_FORMAT,
            "version": POLICY_VERSION,
            "inputs": FEATURES,
            "input_mean": self.input_mean,
            "input_scale": self.input_scale,
            "layers": layers,
            "output": {"scale_ms": self.scale_ms, "max_lead_ms": self.max_lead_ms},
        });
        serde_json::to_string_pretty(&v).unwrap_or_default()
    }

    /// The layers.
    pub fn layers(&self) -> &[MlpLayer] {
        &self.layers
    }

    /// The network's lead for raw features `x` ([`LeadState::features`] order), milliseconds,
    /// clamped to [0, max_lead_ms].
    pub fn lead_ms(&mut self, x: &[f64; 5]) -> f64 {
        let [a, b] = &mut self.buf;
        a.clear();
        a.extend((0..5).map(|i| (x[i] - self.input_mean[i]) / self.input_scale[i]));
        for layer in &self.layers {
            b.clear();
            b.extend(layer.w.iter().zip(&layer.b).map(|(row, &bias)| {
                layer.activation.apply(row.iter().zip(a.iter()).map(|(w, v)| w * v).sum::<f64>() + bias)
            }));
            std::mem::swap(a, b);
        }
        let y = a.first().copied().unwrap_or(f64::NAN) * self.scale_ms;
        if y.is_finite() {
            y.clamp(0.0, self.max_lead_ms)
        } else {
            self.max_lead_ms
        }
    }
}

impl PartialEq for MlpPolicy {
    /// Same normalisation, layers and output mapping (the scratch buffers do not count).
    fn eq(&self, o: &Self) -> bool {
        self.input_mean == o.input_mean
            && self.input_scale == o.input_scale
            && self.layers == o.layers
            && self.scale_ms == o.scale_ms
            && self.max_lead_ms == o.max_lead_ms
    }
}

impl LeadPolicy for MlpPolicy {
    fn name(&self) -> &'static str {
        "mlp"
    }

    fn lead(&mut self, state: &LeadState) -> Duration {
        Duration::from_secs_f64(self.lead_ms(&state.features()) / 1e3)
    }

    fn once(&self) -> bool {
        true
    }
}

fn get<'a>(obj: &'a Map<String, Value>, key: &str, parent: &str) -> Result<&'a Value, PolicyError> {
    obj.get(key).ok_or_else(|| {
        let path = if parent.is_empty() { key.to_string() } else { format!("{parent}.{key}") };
        field_err(path, "missing")
    })
}

fn array<'a>(v: &'a Value, path: &str) -> Result<&'a Vec<Value>, PolicyError> {
    v.as_array().ok_or_else(|| field_err(path, format!("{} is not an array", kind(v))))
}

fn number(v: &Value, path: &str) -> Result<f64, PolicyError> {
    let x = v.as_f64().ok_or_else(|| field_err(path, format!("{} is not a number", kind(v))))?;
    finite(x, || path.to_string())
}

fn numbers(v: &Value, path: &str) -> Result<Vec<f64>, PolicyError> {
    array(v, path)?.iter().enumerate().map(|(i, x)| number(x, &format!("{path}[{i}]"))).collect()
}

fn vec5(v: &Value, path: &str) -> Result<[f64; 5], PolicyError> {
    let xs = numbers(v, path)?;
    <[f64; 5]>::try_from(xs.as_slice())
        .map_err(|_| field_err(path, format!("{} numbers, expected 5 (one per input)", xs.len())))
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
