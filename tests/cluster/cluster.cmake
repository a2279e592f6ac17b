# tandem across simulated hosts: scripts/cluster makes 2 network namespaces joined by a bridge,
# so ranks on different hosts reach each other over TCP only; tests/cluster/cluster_test.sh
# drives each case (see there). They need root and network namespaces, and skip (status 77)
# where these cannot be made.
set(tandem_cluster_timeouts pipeline 600 replicas 600 resume 900 link-cut 400 rank-kill 400
                            checks 60 plan 400)
foreach(case pipeline replicas resume link-cut rank-kill checks plan)
  list(FIND tandem_cluster_timeouts ${case} at)
  math(EXPR at "${at} + 1")
  list(GET tandem_cluster_timeouts ${at} timeout)
  add_test(NAME test_cluster_${case}
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/cluster_test.sh ${case} $<TARGET_FILE:tandem_cli>
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(test_cluster_${case} PROPERTIES TIMEOUT ${timeout} LABELS "mpi;cluster"
                       SKIP_RETURN_CODE 77)
endforeach()
