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

/// `f` on a pool of `jobs` threads: its own parallel iterators use no more.
pub fn install<R: Send>(jobs: usize, f: impl FnOnce() -> R + Send) -> R {
    match rayon::ThreadPoolBuilder::new()
        .num_threads(jobs.max(1))
        .build()
    {
        Ok(pool) => pool.install(f),
        Err(_) => f(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_bounds_the_threads_of_what_it_runs() {
        for jobs in [1, 3] {
            let (threads, sum) = install(jobs, || {
                let sum: u64 = (0..1000u64).into_par_iter().sum();
                (rayon::current_num_threads(), sum)
            });
            assert_eq!((threads, sum), (jobs, 499_500), "jobs {jobs}");
        }
    }

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
