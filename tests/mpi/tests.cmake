# MPI test registration: zerolap_add_mpi_test(NAME NP "[catch tags]" TIMEOUT_S).
# Every case runs under mpirun --oversubscribe; the TIMEOUT turns a hang into a fast failure.
foreach(np 1 2 3 4)
  zerolap_add_mpi_test(communicator ${np} "[comm]" 120)
  zerolap_add_mpi_test(equivalence ${np} "[equivalence]" 600)
  zerolap_add_mpi_test(determinism ${np} "[determinism]" 300)
  zerolap_add_mpi_test(zero ${np} "[zero]" 600)
endforeach()
zerolap_add_mpi_test(communicator_timeout 2 "[comm-timeout]" 120)
