"""What the tests and the benchmarks run beside asyncfs: a one-node Ceph
S3 gateway on loopback, a fault-injecting TCP proxy, fakes of the services
credentials come from, and the child processes some tests kill."""
