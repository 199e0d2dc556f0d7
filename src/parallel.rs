//! Data parallelism: the independent pieces of a command (traces, policies, load steps)
//! run on a rayon pool of as many threads as asked for, results in the items' order.

use rayon::prelude::*;

/// The threads to use when none are asked for: one per CPU available.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `f` over `items` on up to `jobs` threads; the results in the items' order.
pub fn map<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    f: impl Fn(&T) -> R + Sync + Send,
) -> Vec<R> {
    let jobs = jobs.max(1).min(items.len().max(1));
    if jobs == 1 {
        return items.iter().map(f).collect();
    }
    match rayon::ThreadPoolBuilder::new().num_threads(jobs).build() {
        Ok(pool) => pool.install(|| items.par_iter().map(&f).collect()),
        // No threads to be had: the same work, in this one.
        Err(_) => items.iter().map(f).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_the_items_order_on_any_number_of_threads() {
        let items: Vec<u64> = (0..100).collect();
        for jobs in [0, 1, 2, 7, 500] {
            // Later items finish first: the order must not follow completion.
            let out = map(&items, jobs, |&i| {
                std::thread::sleep(std::time::Duration::from_micros(100 - i));
                i * i
            });
            assert_eq!(
                out,
                items.iter().map(|i| i * i).collect::<Vec<_>>(),
                "jobs {jobs}"
            );
        }
        assert!(map(&[] as &[u8], 4, |_| 0).is_empty());
    }
}
