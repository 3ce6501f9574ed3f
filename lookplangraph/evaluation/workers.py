"""The workers of an evaluation (:func:`lookplangraph.evaluation.runner.evaluate`): threads of
this process, or threads spread over worker processes, taking tasks from one bounded queue and
handing every finished row (and log line, and error) to the one writer.

A *job* is any object with ``run(task, lm, augmentation, log) -> row`` (the runner's episode
job); the workers know nothing else of episodes. :class:`WorkerThreads` and
:class:`WorkerProcesses` have the same three calls: ``start(tasks)``, ``messages()`` (yields
``("row", row)``, ``("log", line)`` and ``("error", exception)`` until every worker has ended) and
``close()``.

Worker processes are started with the ``spawn`` context; the job, the LM factory and the
augmentation factory travel to them pickled, with the shared endpoint pool inside the LM factory
(:mod:`lookplangraph.lm.pool`). A worker process exits at once when its parent dies, and a worker
process that dies makes ``messages()`` raise :class:`WorkerDied`.
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Any, Callable

from lookplangraph.lm import LMError
from lookplangraph.lm.pool import MP_CONTEXT


def _work(job, take: Callable[[], Any], put: Callable[[tuple], None], stop,
          lm_factory: Callable[[], object], augmentation_factory, log: Callable[[str], None]) -> None:
    """One worker: episodes of the tasks ``take`` gives (None: no more) until ``stop`` is set;
    each row, or the error that stopped the worker, goes to ``put``; ``("exit", None)`` last.
    Its LM (and augmentation) is made at its first task."""
    lm = augmentation = None
    try:
        while not stop.is_set():
            task = take()
            if task is _NOTHING_YET:
                continue
            if task is None or stop.is_set():
                return
            if lm is None:
                lm = lm_factory()
                augmentation = augmentation_factory(lm) if augmentation_factory else None
            put(("row", job.run(task, lm, augmentation, log)))
    except BaseException as exc:  # handed to the writer, which stops the evaluation
        stop.set()
        put(("error", exc))
    finally:
        put(("exit", None))


_NOTHING_YET = object()  # a worker's poll of the task queue timed out


def _taker(work) -> Callable[[], object]:
    """A worker's ``take``: the next task of ``work``, or :data:`_NOTHING_YET` after 0.2 s (so the
    worker looks at ``stop`` again)."""
    def take():
        try:
            return work.get(timeout=0.2)
        except queue.Empty:
            return _NOTHING_YET
    return take


def _feed(work, todo: list, ends: int, stop) -> None:
    """Put every task, then ``ends`` end marks (one per worker), into the bounded queue ``work``,
    giving up when ``stop`` is set."""
    for task in todo:
        while not stop.is_set():
            try:
                work.put(task, timeout=0.2)
                break
            except queue.Full:
                continue
    for _ in range(ends):
        while True:  # one end mark per worker (a stopped worker may no longer take it)
            try:
                work.put(None, timeout=0.2)
                break
            except queue.Full:
                if stop.is_set():
                    return


class WorkerThreads:
    """``workers`` worker threads in this process (module doc)."""

    def __init__(self, job, lm_factory, augmentation_factory, workers: int, log):
        self.job, self.lm_factory, self.augmentation_factory, self.workers, self.log = (
            job, lm_factory, augmentation_factory, workers, log)
        self.work: queue.Queue = queue.Queue(maxsize=2 * workers)  # bounded: tasks go out as workers free up
        self.finished: queue.Queue = queue.Queue()
        self.stop = threading.Event()

    def start(self, todo: list) -> None:
        take = _taker(self.work)
        for i in range(self.workers):
            threading.Thread(target=_work, args=(self.job, take, self.finished.put, self.stop, self.lm_factory,
                                                 self.augmentation_factory, self.log),
                             name=f"eval-worker-{i}", daemon=True).start()
        threading.Thread(target=_feed, args=(self.work, todo, self.workers, self.stop), name="eval-feeder",
                         daemon=True).start()

    def messages(self):
        running = self.workers
        while running:
            kind, value = self.finished.get()
            if kind == "exit":
                running -= 1
            else:
                yield kind, value

    def close(self) -> None:
        self.stop.set()


class WorkerDied(RuntimeError):
    """A worker process of an evaluation ended without handing over its episodes (killed, out
    of memory, a crash in native code); the episodes it was running are not written and run
    again on resume."""


class WorkerProcesses:
    """``workers`` worker threads spread over ``processes`` worker processes (module doc): the
    tasks go to them through one bounded queue, rows, log lines and errors come back through
    another."""

    def __init__(self, job, lm_factory, augmentation_factory, workers: int, processes: int):
        self.ctx = MP_CONTEXT
        self.threads = [workers // processes + (i < workers % processes) for i in range(processes)]
        self.workers = workers
        self.work = self.ctx.Queue(maxsize=2 * workers)
        self.finished = self.ctx.Queue()
        self.stop = self.ctx.Event()
        self.procs = [self.ctx.Process(target=_process_main, name=f"eval-process-{i}",
                                       args=(n, job, self.work, self.finished, self.stop, lm_factory,
                                             augmentation_factory))
                      for i, n in enumerate(self.threads)]
        self.local_stop = threading.Event()

    def start(self, todo: list) -> None:
        import pickle

        for proc in self.procs:
            try:
                proc.start()
            except (pickle.PicklingError, AttributeError, TypeError) as exc:
                raise ValueError("with worker processes the LM factory and the augmentation factory must be "
                                 "picklable (module-level functions or classes, not closures or lambdas): "
                                 f"{exc}") from None
        threading.Thread(target=_feed, args=(self.work, todo, self.workers, self.local_stop), name="eval-feeder",
                         daemon=True).start()

    def messages(self):
        running = self.workers
        while running:
            try:
                kind, value = self.finished.get(timeout=0.5)
            except queue.Empty:
                dead = [p for p in self.procs if p.exitcode not in (None, 0)]
                if dead:
                    self.stop.set()
                    self.local_stop.set()
                    p = dead[0]
                    raise WorkerDied(f"worker process {p.name} (pid {p.pid}) ended with exit code {p.exitcode} "
                                     "while running episodes; the finished ones are written, rerun to resume")
                continue
            if kind == "exit":
                running -= 1
            else:
                if kind == "error":
                    self.stop.set()
                    self.local_stop.set()
                yield kind, value

    def close(self) -> None:
        self.stop.set()
        self.local_stop.set()
        started = [proc for proc in self.procs if proc.pid is not None]
        for proc in started:
            proc.join(timeout=5)
        for proc in started:
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
        self.work.cancel_join_thread()
        self.finished.cancel_join_thread()


def _process_main(threads: int, job, work, finished, stop, lm_factory, augmentation_factory) -> None:
    """A worker process: ``threads`` workers (:func:`_work`) on the shared queues; rows, errors
    (made picklable) and log lines go back to the writer. Exits at once if the writer dies."""
    import multiprocessing

    parent = multiprocessing.parent_process()
    if parent is not None:
        def watch() -> None:
            from multiprocessing.connection import wait

            wait([parent.sentinel])
            os._exit(70)  # the writer is gone: nothing this process finishes could be written

        threading.Thread(target=watch, name="eval-parent-watch", daemon=True).start()

    def put(message: tuple) -> None:
        if message[0] == "error":
            message = ("error", _picklable(message[1]))
        finished.put(message)

    def log(line: str) -> None:
        finished.put(("log", line))

    take = _taker(work)
    pool = [threading.Thread(target=_work, args=(job, take, put, stop, lm_factory, augmentation_factory, log),
                             name=f"eval-worker-{i}") for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()


def _picklable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling as itself, else an exception of the nearest kind the
    writer's caller tells apart (:class:`LMError`, ``ValueError``, ``RuntimeError``) with its
    message and type name."""
    import pickle

    try:
        back = pickle.loads(pickle.dumps(exc))
        if type(back) is type(exc) and str(back) == str(exc):
            return exc
    except Exception:
        pass
    for kind in (LMError, ValueError):
        if isinstance(exc, kind):
            return kind(f"{type(exc).__name__}: {exc}")
    return RuntimeError(f"{type(exc).__name__} in a worker process: {exc}")
