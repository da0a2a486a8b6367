"""The segment layer below SPMD loops (runtime/spmd/) and training (runtime/training/): a segment is one long-running
task per worker over the tiles it holds. driver.py (client side: place, watch, abort, retry), placement.py (which
worker runs which tiles), rank.py (worker side: the rank context, progress and abort flags), and the collectives:
ports.py (each worker's ring port), ring.py (the group: allreduce, allgather, neighbour exchange), shm.py (shared
memory between ranks on one host), service.py (client requests straight to a worker's port), quiet.py (a worker's
profiler paused while ranks run). Neither SPMD nor training is imported here, nor do they import each other."""
