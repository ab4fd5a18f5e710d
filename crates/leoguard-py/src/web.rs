//! Bindings of the web page corpus: page summaries and per-object tables as columns.

use crate::LeoguardError;
use leoguard_sim::web::corpus::{page, CORPUS_PAGES};
use pyo3::prelude::*;
use pyo3::types::PyDict;

fn check(first: u32, count: u32) -> PyResult<()> {
    if u64::from(first) + u64::from(count) > u64::from(CORPUS_PAGES) {
        return Err(LeoguardError::new_err(format!(
            "invalid pages {first}..{}: the corpus has pages 0..{CORPUS_PAGES}",
            u64::from(first) + u64::from(count)
        )));
    }
    Ok(())
}

/// One row per page `first..first + count` of corpus `seed`: page, objects, bytes, origins, depth,
/// visual objects.
#[pyfunction]
#[pyo3(signature = (seed, count, first = 0))]
fn web_corpus<'py>(py: Python<'py>, seed: u64, count: u32, first: u32) -> PyResult<Bound<'py, PyDict>> {
    check(first, count)?;
    let pages: Vec<_> = (first..first + count).map(|i| page(seed, i)).collect();
    let d = PyDict::new(py);
    d.set_item("page", pages.iter().map(|p| p.index).collect::<Vec<_>>())?;
    d.set_item("objects", pages.iter().map(|p| p.objects.len() as u32).collect::<Vec<_>>())?;
    d.set_item("bytes", pages.iter().map(|p| p.bytes()).collect::<Vec<_>>())?;
    d.set_item("origins", pages.iter().map(|p| p.origins).collect::<Vec<_>>())?;
    d.set_item("depth", pages.iter().map(|p| p.depth()).collect::<Vec<_>>())?;
    let visual =
        |p: &leoguard_sim::web::corpus::Page| p.objects.iter().filter(|o| o.visual_weight > 0.0).count() as u32;
    d.set_item("visual_objects", pages.iter().map(visual).collect::<Vec<_>>())?;
    Ok(d)
}

/// The objects of page `index` of corpus `seed`, one row each.
#[pyfunction]
fn web_page_objects<'py>(py: Python<'py>, seed: u64, index: u32) -> PyResult<Bound<'py, PyDict>> {
    check(index, 1)?;
    let p = page(seed, index);
    let o = &p.objects;
    let d = PyDict::new(py);
    d.set_item("id", o.iter().map(|x| x.id).collect::<Vec<_>>())?;
    d.set_item("origin", o.iter().map(|x| x.origin).collect::<Vec<_>>())?;
    d.set_item("size", o.iter().map(|x| x.size).collect::<Vec<_>>())?;
    d.set_item("type", o.iter().map(|x| x.kind.name()).collect::<Vec<_>>())?;
    d.set_item("parent", o.iter().map(|x| x.parent).collect::<Vec<_>>())?;
    d.set_item("visual_weight", o.iter().map(|x| x.visual_weight).collect::<Vec<_>>())?;
    d.set_item("above_fold", o.iter().map(|x| x.above_fold).collect::<Vec<_>>())?;
    Ok(d)
}

/// Adds the corpus functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(web_corpus, m)?)?;
    m.add_function(wrap_pyfunction!(web_page_objects, m)?)?;
    m.add("WEB_CORPUS_PAGES", CORPUS_PAGES)?;
    Ok(())
}
