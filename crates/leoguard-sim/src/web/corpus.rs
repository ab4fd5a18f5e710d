//! A synthetic web-page corpus drawn from published web statistics (docs/web.md has the sources).
//!
//! Page `i` of corpus `seed` is a function of `(seed, i)` alone: it draws from its own random stream
//! `web/corpus/<i>` of run seed `seed`, so the Rust simulator and the Python front see the same pages
//! and adding pages never changes earlier ones.
//!
//! Each page is a dependency tree of objects: the root HTML document (object 0, origin 0) and the
//! sub-resources it references directly or through a stylesheet or script. The parameters are the
//! HTTP Archive / Web Almanac medians (page weight, requests and bytes per resource type, hosts per
//! page) listed below with their sources.

use leoguard_core::{stream, RngStream};

/// Number of pages a corpus has (valid page indices are `0..CORPUS_PAGES`).
pub const CORPUS_PAGES: u32 = 1000;

/// Resource type of an object (HTTP Archive's classification by MIME type).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ObjType {
    /// An HTML document (the root, or an iframe).
    Html,
    /// A stylesheet.
    Css,
    /// A script.
    Js,
    /// An image.
    Image,
    /// A web font.
    Font,
    /// Anything else (JSON/XHR, text, media, ...).
    Other,
}

impl ObjType {
    /// Lower-case name as in the results tables.
    pub fn name(self) -> &'static str {
        match self {
            ObjType::Html => "html",
            ObjType::Css => "css",
            ObjType::Js => "js",
            ObjType::Image => "image",
            ObjType::Font => "font",
            ObjType::Other => "other",
        }
    }
}

/// One object of a page.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WebObject {
    /// Index in the page (0 is the root document).
    pub id: u32,
    /// Host it is fetched from (0 is the page's own host).
    pub origin: u32,
    /// Response body, bytes (transfer size, as HTTP Archive counts it).
    pub size: u64,
    /// Resource type.
    pub kind: ObjType,
    /// The object whose completion reveals this one (`None` for the root).
    pub parent: Option<u32>,
    /// Weight in the visual-completeness estimate (0: not visual; see `web::metrics`).
    pub visual_weight: f64,
    /// Whether it is painted above the fold.
    pub above_fold: bool,
}

/// One page of the corpus.
#[derive(Clone, Debug, PartialEq)]
pub struct Page {
    /// Index in the corpus.
    pub index: u32,
    /// Objects, parents before children.
    pub objects: Vec<WebObject>,
    /// Number of distinct hosts.
    pub origins: u32,
}

impl Page {
    /// Sum of object sizes.
    pub fn bytes(&self) -> u64 {
        self.objects.iter().map(|o| o.size).sum()
    }

    /// Depth of the dependency tree (the root alone: 0).
    pub fn depth(&self) -> u32 {
        let mut d = vec![0u32; self.objects.len()];
        for o in &self.objects {
            if let Some(p) = o.parent {
                d[o.id as usize] = d[p as usize] + 1;
            }
        }
        d.into_iter().max().unwrap_or(0)
    }

    /// Children of each object, in object order.
    pub fn children(&self) -> Vec<Vec<u32>> {
        let mut c = vec![Vec::new(); self.objects.len()];
        for o in &self.objects {
            if let Some(p) = o.parent {
                c[p as usize].push(o.id);
            }
        }
        c
    }
}

/// A lognormal distribution given by its median and one more published quantile or its mean.
#[derive(Clone, Copy, Debug)]
struct LogNormal {
    mu: f64,
    sigma: f64,
}

impl LogNormal {
    /// From the median and the 75th percentile (z(0.75) = 0.6745).
    fn from_median_p75(median: f64, p75: f64) -> Self {
        LogNormal { mu: median.ln(), sigma: (p75 / median).ln() / 0.6745 }
    }

    /// From the median and the mean (mean = median * exp(sigma^2 / 2)).
    fn from_median_mean(median: f64, mean: f64) -> Self {
        LogNormal { mu: median.ln(), sigma: (2.0 * (mean / median).ln()).sqrt() }
    }

    fn sample(&self, rng: &mut RngStream) -> f64 {
        (self.mu + self.sigma * normal(rng)).exp()
    }
}

/// A standard normal draw (Box-Muller; one of the pair is discarded to keep the stream simple).
fn normal(rng: &mut RngStream) -> f64 {
    let u1 = 1.0 - rng.uniform(); // (0, 1]
    let u2 = rng.uniform();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Requests per page: Web Almanac 2022, Page Weight chapter (mobile, HTTP Archive June 2022): median
/// 70 requests, 75th percentile ~113 (the 2024 edition reports a median of ~71: stable since 2020).
pub const REQUESTS_MEDIAN: f64 = 70.0;
/// 75th percentile of requests per page (same source).
pub const REQUESTS_P75: f64 = 113.0;
/// Bounds on requests per page (HTTP Archive's 10th and 99th percentiles are ~20 and ~400).
const REQUESTS_RANGE: (f64, f64) = (8.0, 400.0);

/// Distinct hosts per page: HTTP Archive `numDomains` (page summary), median ~16 with 75th
/// percentile ~27 for 2022-2024 crawls (the Web Almanac 2022 Third Parties chapter: a median page
/// contacts about a dozen third-party hosts besides its own).
pub const HOSTS_MEDIAN: f64 = 16.0;
/// 75th percentile of hosts per page (same source).
pub const HOSTS_P75: f64 = 27.0;

/// Page weight the corpus is checked against (tests): Web Almanac 2022 Page Weight, median mobile page
/// 2,020 KB (desktop 2,315 KB; 2024: 2,311 KB mobile).
pub const PAGE_BYTES_MEDIAN: f64 = 2_020_000.0;

/// Per resource type: (share of a page's sub-resource requests, median bytes per response, mean
/// bytes per response). Shares from the Web Almanac 2022 Page Weight chapter's median requests per
/// type on mobile (images ~24, scripts ~22, CSS ~7, fonts ~4, HTML ~2, other ~11 of 70). The
/// medians per response are HTTP Archive's per-request medians by type (2022 summary_requests). The
/// means per response are calibrated so that the corpus's median page bytes per type (first 200 pages
/// of seed 42) match the chapter's per-type medians (images 881 KB, JS 461 KB, CSS 68 KB, fonts
/// 110 KB, other ~25 KB): the per-type median over the request count (36.7, 21, 9.7, 27.5, 2.3 KB)
/// scaled up by 1.15-1.35, since the median of a sum of skewed draws is below count x mean. The
/// lognormal's spread follows from median and mean.
const TYPES: [(ObjType, f64, f64, f64); 6] = [
    (ObjType::Image, 24.0 / 70.0, 10_000.0, 42_000.0),
    (ObjType::Js, 22.0 / 70.0, 6_000.0, 25_000.0),
    (ObjType::Css, 7.0 / 70.0, 3_000.0, 11_700.0),
    (ObjType::Font, 4.0 / 70.0, 20_000.0, 31_500.0),
    (ObjType::Html, 2.0 / 70.0, 8_000.0, 15_000.0),
    (ObjType::Other, 11.0 / 70.0, 500.0, 3_100.0),
];

/// Root HTML document: median 30 KB transfer size (Web Almanac 2022 Page Weight / Markup: median HTML
/// bytes per page ~30 KB), 75th percentile ~60 KB.
const ROOT_HTML: (f64, f64) = (30_000.0, 60_000.0);

/// Share of sub-resources on the page's own host (Web Almanac 2022 Third Parties: about 45 % of
/// requests go to third parties).
const FIRST_PARTY_SHARE: f64 = 0.55;

/// Dependency structure (WProf, Wang et al. NSDI 2013; Polaris, Netravali et al. NSDI 2016: most
/// objects hang directly off the HTML, stylesheets reveal fonts and background images, scripts load
/// further scripts, XHRs and images; dependency chains are a few levels deep). Probabilities that a
/// sub-resource of a type is revealed by a stylesheet / script rather than by the HTML, where the
/// page has one to hang it from.
const FONT_FROM_CSS: f64 = 0.9;
const IMAGE_FROM_CSS: f64 = 0.15;
const IMAGE_FROM_JS: f64 = 0.15;
const JS_FROM_JS: f64 = 0.3;
const OTHER_FROM_JS: f64 = 0.7;
/// Deepest level an object may sit at (the root is level 0).
pub const MAX_DEPTH: u32 = 4;

/// Share of images painted above the fold (the first image of a page always is): about a quarter of
/// a median page's images are in the initial viewport (Web Almanac 2022 Media: lazy-loading applies
/// to the below-the-fold majority).
const IMAGE_ABOVE_FOLD: f64 = 0.25;
/// Share of iframes above the fold (assumption: ads and embeds are mostly below the fold).
const IFRAME_ABOVE_FOLD: f64 = 0.2;

/// Page `index` of corpus `seed`.
pub fn page(seed: u64, index: u32) -> Page {
    let mut rng = stream(seed, &format!("web/corpus/{index}"));
    let requests = LogNormal::from_median_p75(REQUESTS_MEDIAN, REQUESTS_P75)
        .sample(&mut rng)
        .clamp(REQUESTS_RANGE.0, REQUESTS_RANGE.1)
        .round() as u32;
    let hosts =
        (LogNormal::from_median_p75(HOSTS_MEDIAN, HOSTS_P75).sample(&mut rng).round() as u32).clamp(1, requests);
    let root_size = LogNormal::from_median_p75(ROOT_HTML.0, ROOT_HTML.1).sample(&mut rng).max(500.0) as u64;
    let mut objects = vec![WebObject {
        id: 0,
        origin: 0,
        size: root_size,
        kind: ObjType::Html,
        parent: None,
        visual_weight: 0.0,
        above_fold: true,
    }];
    let mut depth = vec![0u32];
    let sizes: Vec<LogNormal> = TYPES.iter().map(|t| LogNormal::from_median_mean(t.2, t.3)).collect();
    let mut first_image = true;
    for id in 1..requests {
        let u = rng.uniform();
        let mut acc = 0.0;
        let mut ti = TYPES.len() - 1;
        for (i, t) in TYPES.iter().enumerate() {
            acc += t.1;
            if u < acc {
                ti = i;
                break;
            }
        }
        let kind = TYPES[ti].0;
        let size = sizes[ti].sample(&mut rng).clamp(100.0, 20e6) as u64;
        let parent_kind = match kind {
            ObjType::Font if rng.bernoulli(FONT_FROM_CSS) => Some(ObjType::Css),
            ObjType::Image => {
                let u = rng.uniform();
                if u < IMAGE_FROM_CSS {
                    Some(ObjType::Css)
                } else if u < IMAGE_FROM_CSS + IMAGE_FROM_JS {
                    Some(ObjType::Js)
                } else {
                    None
                }
            }
            ObjType::Js if rng.bernoulli(JS_FROM_JS) => Some(ObjType::Js),
            ObjType::Other if rng.bernoulli(OTHER_FROM_JS) => Some(ObjType::Js),
            _ => None,
        };
        // A uniformly chosen earlier object of the wanted type that is not at the deepest level.
        let parent = parent_kind
            .and_then(|k| {
                let cands: Vec<u32> = (objects.iter())
                    .filter(|o| o.kind == k && depth[o.id as usize] < MAX_DEPTH)
                    .map(|o| o.id)
                    .collect();
                (!cands.is_empty()).then(|| cands[(rng.next_u64() % cands.len() as u64) as usize])
            })
            .unwrap_or(0);
        // Hosts: the first `hosts - 1` sub-resources each open one third-party host (so every host
        // serves something); later ones are first-party or from an existing third-party host.
        let origin = if id < hosts {
            id
        } else if hosts == 1 || rng.bernoulli(FIRST_PARTY_SHARE) {
            0
        } else {
            1 + (rng.next_u64() % u64::from(hosts - 1)) as u32
        };
        let above_fold = match kind {
            ObjType::Image => {
                let atf = first_image || rng.bernoulli(IMAGE_ABOVE_FOLD);
                first_image = false;
                atf
            }
            ObjType::Html => rng.bernoulli(IFRAME_ABOVE_FOLD),
            _ => false,
        };
        depth.push(depth[parent as usize] + 1);
        objects.push(WebObject { id, origin, size, kind, parent: Some(parent), visual_weight: 0.0, above_fold });
    }
    for o in &mut objects {
        o.visual_weight = visual_weight(o);
    }
    Page { index, objects, origins: hosts }
}

/// Visual weight of an object: the bytes of what it paints above the fold (ByteIndex-style, Bocchi et
/// al. 2016: bytes stand in for painted area), the root document's text included; other objects
/// (stylesheets, scripts, fonts, below-the-fold content) carry none.
fn visual_weight(o: &WebObject) -> f64 {
    match o.kind {
        ObjType::Html | ObjType::Image if o.above_fold => o.size as f64,
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn median(mut v: Vec<f64>) -> f64 {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    }

    #[test]
    fn pages_are_reproducible_and_distinct() {
        assert_eq!(page(7, 3), page(7, 3));
        assert_ne!(page(7, 3), page(7, 4));
        assert_ne!(page(7, 3), page(8, 3));
    }

    #[test]
    fn pages_are_well_formed_trees() {
        for i in 0..200 {
            let p = page(1, i);
            assert_eq!(p.objects[0].kind, ObjType::Html);
            assert_eq!(p.objects[0].parent, None);
            assert!(p.depth() <= MAX_DEPTH);
            let mut used = vec![false; p.origins as usize];
            for (j, o) in p.objects.iter().enumerate() {
                assert_eq!(o.id as usize, j);
                assert!(o.parent.is_none_or(|x| x < o.id), "page {i} object {j}");
                assert!(o.origin < p.origins);
                used[o.origin as usize] = true;
            }
            assert!(used.iter().all(|&u| u), "page {i}: a host serves nothing");
            assert!(p.objects[0].visual_weight > 0.0);
        }
    }

    /// Over 200 pages the sample median of a lognormal quantity with spread sigma has a standard
    /// error of about 1.25 sigma / sqrt(200) in log space (0.065 for sigma 0.73, requests; 0.07 for
    /// hosts): +-20 % is about three standard errors. Page bytes are a sum of per-type draws the
    /// corpus does not correlate (real pages that are heavy in images tend to be heavy in scripts
    /// too), so its median is allowed +-30 % of the published one.
    #[test]
    fn corpus_medians_match_the_published_ones() {
        let pages: Vec<Page> = (0..200).map(|i| page(42, i)).collect();
        let req = median(pages.iter().map(|p| p.objects.len() as f64).collect());
        let hosts = median(pages.iter().map(|p| f64::from(p.origins)).collect());
        let bytes = median(pages.iter().map(|p| p.bytes() as f64).collect());
        assert!((req / REQUESTS_MEDIAN - 1.0).abs() < 0.2, "requests median {req}");
        assert!((hosts / HOSTS_MEDIAN - 1.0).abs() < 0.2, "hosts median {hosts}");
        assert!((bytes / PAGE_BYTES_MEDIAN - 1.0).abs() < 0.3, "bytes median {bytes}");
        let depth = median(pages.iter().map(|p| f64::from(p.depth())).collect());
        assert!((2.0..=4.0).contains(&depth), "depth median {depth}");
    }
}
