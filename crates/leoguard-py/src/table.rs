//! `ResultTable`: a result table's columns held on the Rust side until Python needs them, either as
//! a DataFrame (`take_parquet`, read by polars) or as a file (`write`, zstd-compressed Parquet).
//! A run's results can thus be written and summarised without importing polars
//! (docs/performance.md, "Results without polars on the run path").

use crate::LeoguardError;
use leoguard_core::parquet::{self, Codec, Column, Table, CODEC_ZSTD};
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::path::PathBuf;

#[path = "table_state.rs"]
mod state;

/// The zstd level of written tables: polars' default, so files stay the size they were.
const ZSTD_LEVEL: i32 = 3;

/// A table of named, typed columns (`leoguard_core::parquet::Column`).
#[pyclass(module = "leoguard._core")]
pub struct ResultTable {
    /// None once `take_parquet` has handed them over.
    columns: Option<Vec<(String, Column)>>,
    rows: usize,
}

impl ResultTable {
    /// A table of `columns`, checked (same length, distinct names).
    pub fn new(columns: Vec<(&str, Column)>) -> PyResult<Self> {
        let columns: Vec<(String, Column)> = columns.into_iter().map(|(n, c)| (n.to_string(), c)).collect();
        let table = Table::new(&columns).map_err(|e| LeoguardError::new_err(e.to_string()))?;
        drop(table);
        let rows = columns.first().map_or(0, |(_, c)| c.len());
        Ok(ResultTable { columns: Some(columns), rows })
    }

    fn columns(&self) -> PyResult<&Vec<(String, Column)>> {
        self.columns
            .as_ref()
            .ok_or_else(|| LeoguardError::new_err("this result table was already handed over (take_parquet)"))
    }
}

/// A Python list of `dtype` values (None: null) as a column.
fn column(name: &str, dtype: &str, values: &Bound<'_, PyAny>) -> PyResult<Column> {
    /// The values as `T`s: a required column when none is null, else a nullable one.
    fn typed<'py, T: Copy + FromPyObject<'py>>(
        values: &Bound<'py, PyAny>,
        required: fn(Vec<T>) -> Column,
        nullable: fn(Vec<Option<T>>) -> Column,
    ) -> PyResult<Column> {
        let v: Vec<Option<T>> = values.extract()?;
        Ok(v.iter().copied().collect::<Option<Vec<T>>>().map_or_else(|| nullable(v), required))
    }
    let c = match dtype {
        "bool" => typed(values, Column::Bool, Column::OptBool),
        "u32" => typed(values, Column::U32, Column::OptU32),
        "u64" => typed(values, Column::U64, Column::OptU64),
        "i64" => typed(values, Column::I64, Column::OptI64),
        "f64" => typed(values, Column::F64, Column::OptF64),
        "str" => values.extract().map(Column::Str),
        _ => return Err(LeoguardError::new_err(format!("result column {name}: unknown type {dtype}"))),
    };
    c.map_err(|e| LeoguardError::new_err(format!("result column {name} ({dtype}): {e}")))
}

#[pymethods]
impl ResultTable {
    /// A table from `[(name, dtype, values)]`: dtype one of bool, u32, u64, i64, f64, str; a None
    /// in the values is a null.
    #[new]
    fn from_python(columns: Vec<(String, String, Bound<'_, PyAny>)>) -> PyResult<Self> {
        let cols = columns.iter().map(|(n, t, v)| Ok((n.as_str(), column(n, t, v)?))).collect::<PyResult<Vec<_>>>()?;
        Self::new(cols)
    }

    /// Its rows.
    #[getter]
    fn rows(&self) -> usize {
        self.rows
    }

    /// Its column names, in order.
    #[getter]
    fn names(&self) -> PyResult<Vec<String>> {
        Ok(self.columns()?.iter().map(|(n, _)| n.clone()).collect())
    }

    /// The table as an uncompressed Parquet file's bytes, for `pl.read_parquet`; the columns are
    /// freed (a large table is not held twice), so the table can be handed over only once.
    fn take_parquet<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let table = Table::new(self.columns()?).map_err(|e| LeoguardError::new_err(e.to_string()))?;
        // Written straight into the bytes object: a large table is not first built in a Vec and copied.
        let bytes = PyBytes::new_with(py, table.file_len(), |buf| {
            table.write(buf);
            Ok(())
        })?;
        drop(table);
        // Freed only once the bytes exist: a failure above leaves the table as it was.
        self.columns = None;
        Ok(bytes)
    }

    /// Pickling (a Ray worker sends its results to the driver): the columns in `state`'s encoding.
    fn __getstate__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        Ok(PyBytes::new(py, &state::encode(self.columns()?)))
    }

    fn __setstate__(&mut self, state: &[u8]) -> PyResult<()> {
        let columns =
            state::decode(state).ok_or_else(|| LeoguardError::new_err("a pickled result table is corrupt"))?;
        Table::new(&columns).map_err(|e| LeoguardError::new_err(format!("a pickled result table: {e}")))?;
        self.rows = columns.first().map_or(0, |(_, c)| c.len());
        self.columns = Some(columns);
        Ok(())
    }

    fn __getnewargs__(&self) -> (Vec<(String, String, Vec<bool>)>,) {
        (Vec::new(),)
    }

    /// Writes the table to `path` as zstd-compressed Parquet (the GIL released while it compresses);
    /// a file that cannot be written raises OSError.
    fn write(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        let columns = self.columns()?;
        py.allow_threads(|| {
            let mut zstd = |page: &[u8]| zstd::bulk::compress(page, ZSTD_LEVEL);
            let file = parquet::compressed(columns, Codec { id: CODEC_ZSTD, compress: &mut zstd })
                .map_err(|e| LeoguardError::new_err(e.to_string()))?;
            // An OSError of the errno's own class (IsADirectoryError, ...) naming the file, as
            // polars' writer raised, so callers' `except OSError` still catches a full disk.
            std::fs::write(&path, file).map_err(|e| match e.raw_os_error() {
                Some(errno) => {
                    // The error's text without Rust's " (os error N)": Python's own strerror.
                    let text = e.to_string();
                    let strerror = text.strip_suffix(&format!(" (os error {errno})")).unwrap_or(&text).to_string();
                    PyOSError::new_err((errno, strerror, path.display().to_string()))
                }
                None => PyOSError::new_err(format!("cannot write {}: {e}", path.display())),
            })
        })
    }
}
