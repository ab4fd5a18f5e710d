//! Beams and cells: an H3 hexagonal cell grid over the Earth (the `h3o` crate), cells assigned to the
//! beams of serving satellites, and the cell-centre-to-satellite distance that SATGUARD's beam timers
//! use (SATGUARD §3.3: thd = 2·d/c, recomputed as the satellite moves).

use crate::error::OrbitError;
use crate::geo::{distance, Geodetic, Vec3, EARTH_RADIUS_M, SPEED_OF_LIGHT_M_S};
use crate::ground::VisibilityFilter;
use h3o::{CellIndex, LatLng, Resolution};

/// Default H3 resolution: res 5 cells (~253 km^2, ~9.9 km edge) are close to Starlink's service cells.
pub const DEFAULT_RESOLUTION: u8 = 5;

/// The cell grid at one H3 resolution.
#[derive(Clone, Copy, Debug)]
pub struct CellGrid {
    res: Resolution,
}

/// A cell served by a satellite's beam at one instant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Beam {
    /// H3 cell index.
    pub cell: u64,
    /// Serving satellite (global index).
    pub sat: u32,
    /// Straight-line distance from the cell centre to the satellite, metres.
    pub distance_m: f64,
}

impl Beam {
    /// SATGUARD's beam timeout thd = 2·d/c, seconds.
    pub fn timeout_s(&self) -> f64 {
        2.0 * self.distance_m / SPEED_OF_LIGHT_M_S
    }
}

impl CellGrid {
    /// A grid at H3 resolution `res` (0..=15).
    pub fn new(res: u8) -> Result<Self, OrbitError> {
        let res = Resolution::try_from(res)
            .map_err(|_| OrbitError::invalid("cell_resolution", res, "must be an H3 resolution in [0, 15]"))?;
        Ok(CellGrid { res })
    }

    /// The resolution.
    pub fn resolution(&self) -> u8 {
        u8::from(self.res)
    }

    /// The cell containing a point.
    pub fn cell_of(&self, lat_deg: f64, lon_deg: f64) -> Result<u64, OrbitError> {
        let ll = LatLng::new(lat_deg, lon_deg).map_err(|_| {
            OrbitError::invalid("latitude/longitude", format!("{lat_deg}, {lon_deg}"), "must be finite")
        })?;
        Ok(u64::from(ll.to_cell(self.res)))
    }

    /// Centre of a cell (on the surface).
    pub fn center(cell: u64) -> Result<Geodetic, OrbitError> {
        let c = CellIndex::try_from(cell)
            .map_err(|_| OrbitError::invalid("cell", format!("{cell:#x}"), "is not a valid H3 cell index"))?;
        let ll = LatLng::from(c);
        Ok(Geodetic { lat_deg: ll.lat(), lon_deg: ll.lng(), alt_m: 0.0 })
    }

    /// Distance from the centre of `cell` to a satellite at `sat` (ECEF), metres.
    pub fn distance_m(cell: u64, sat: Vec3) -> Result<f64, OrbitError> {
        Ok(distance(Self::center(cell)?.to_ecef(), sat))
    }

    /// All cells whose centre sees the satellite at `sat` above the filter's minimum elevation.
    pub fn footprint(&self, sat: Vec3, filter: &VisibilityFilter) -> Result<Vec<u64>, OrbitError> {
        let sub = Geodetic::from_ecef(sat);
        let centre = self.cell_of(sub.lat_deg, sub.lon_deg)?;
        let idx = CellIndex::try_from(centre).map_err(|_| OrbitError::invalid("cell", centre, "invalid"))?;
        // Ground range of the visibility cone, then enough rings to cover it (centre spacing ~ edge*sqrt 3).
        let e = filter.min_elevation_deg().to_radians();
        let r = EARTH_RADIUS_M + sub.alt_m;
        let lam = (EARTH_RADIUS_M * e.cos() / r).clamp(-1.0, 1.0).acos() - e;
        let range_m = lam * EARTH_RADIUS_M;
        let spacing = self.res.edge_length_m() * 3f64.sqrt();
        let k = (range_m / spacing).ceil() as u32 + 2;
        let disk: Vec<CellIndex> = idx.grid_disk(k);
        let mut out: Vec<u64> = disk
            .into_iter()
            .filter(|c| {
                let ll = LatLng::from(*c);
                let g = Geodetic { lat_deg: ll.lat(), lon_deg: ll.lng(), alt_m: 0.0 }.to_ecef();
                filter.visible(g, sat)
            })
            .map(u64::from)
            .collect();
        out.sort_unstable();
        Ok(out)
    }

    /// Assigns each cell to the beam of the highest-elevation visible satellite (None if none).
    pub fn assign(
        &self,
        cells: &[u64],
        pos: &[Vec3],
        filter: &VisibilityFilter,
    ) -> Result<Vec<Option<Beam>>, OrbitError> {
        let mut vis = Vec::new();
        cells
            .iter()
            .map(|&cell| {
                let g = Self::center(cell)?.to_ecef();
                filter.visible_into(g, pos, &mut vis);
                Ok(vis
                    .iter()
                    .map(|&(s, d)| (s, d, crate::geo::elevation_deg(g, pos[s as usize])))
                    .max_by(|a, b| a.2.total_cmp(&b.2))
                    .map(|(s, d, _)| Beam { cell, sat: s, distance_m: d }))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::constellation::Constellation;
    use crate::geo::max_gsl_length_m;

    #[test]
    fn beam_timeout_follows_distance_and_moves_with_the_satellite() {
        let c = Constellation::preset("starlink-shell1").unwrap();
        let grid = CellGrid::new(5).unwrap();
        let f = VisibilityFilter::new(25.0, 550e3).unwrap();
        let cell = grid.cell_of(40.71, -74.0).unwrap();
        let p0 = c.positions(0.0).unwrap();
        let b0 = grid.assign(&[cell], &p0, &f).unwrap()[0].unwrap();
        // 550 km <= d <= max slant range, thd = 2d/c between ~3.7 and ~7.5 ms.
        assert!(b0.distance_m >= 550e3 - 1.0 && b0.distance_m <= max_gsl_length_m(550e3, 25.0) + 1.0);
        assert!((b0.timeout_s() - 2.0 * b0.distance_m / 299_792_458.0).abs() < 1e-15);
        let p1 = c.positions(5.0).unwrap();
        let d1 = CellGrid::distance_m(cell, p1[b0.sat as usize]).unwrap();
        assert!((d1 - b0.distance_m).abs() > 100.0, "distance must change as the satellite moves");
    }

    #[test]
    fn footprint_cells_all_see_the_satellite_and_include_the_subpoint() {
        let c = Constellation::preset("starlink-shell1").unwrap();
        let grid = CellGrid::new(3).unwrap();
        let f = VisibilityFilter::new(25.0, 550e3).unwrap();
        let p = c.positions(0.0).unwrap()[10];
        let cells = grid.footprint(p, &f).unwrap();
        let sub = Geodetic::from_ecef(p);
        assert!(cells.contains(&grid.cell_of(sub.lat_deg, sub.lon_deg).unwrap()));
        // Footprint area ~ pi * (940 km)^2 ~ 2.8e6 km^2; res 3 cells are ~12,400 km^2 -> ~220 cells.
        assert!((150..320).contains(&cells.len()), "{} cells", cells.len());
        assert!(CellGrid::new(16).is_err());
        assert!(CellGrid::center(12345).is_err());
    }
}
