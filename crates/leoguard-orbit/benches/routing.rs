//! Per-snapshot cost of the constellation engine's hot loop (positions, ISL update, one Dijkstra).
//! Prints figures; asserts nothing (STYLE.md rule 14).

use leoguard_orbit::routing::{Dijkstra, SnapshotGraph};
use leoguard_orbit::Constellation;
use std::time::Instant;

fn main() {
    let c = Constellation::preset("starlink-shell1").expect("preset");
    let mut g = SnapshotGraph::new(&c);
    let mut dj = Dijkstra::default();
    let mut pos = Vec::new();
    let n = 2000;
    let t0 = Instant::now();
    for k in 0..n {
        c.positions_into(k as f64 * 0.1, &mut pos).expect("walker positions never fail");
    }
    let t_pos = t0.elapsed().as_secs_f64() / n as f64;
    let t0 = Instant::now();
    for _ in 0..n {
        g.update(&c, &pos);
    }
    let t_isl = t0.elapsed().as_secs_f64() / n as f64;
    let t0 = Instant::now();
    for k in 0..n {
        dj.run(&g, &[((k * 7 % 1584) as u32, 0.0)]);
    }
    let t_dj = t0.elapsed().as_secs_f64() / n as f64;
    println!(
        "{{\"positions_us\": {:.1}, \"isl_update_us\": {:.1}, \"dijkstra_us\": {:.1}}}",
        t_pos * 1e6,
        t_isl * 1e6,
        t_dj * 1e6
    );
}
