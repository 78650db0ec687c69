# The `bundle` target: dist/qgate/, a relocatable folder that runs on a GPU host with only a
# driver. bin/ holds the executables, plugins/ the kernel builds (plugins/faults/ the fault builds
# of kernels/test_builds, when tests are built), lib/ every non-system shared library they need (found
# through RPATH $ORIGIN/../lib), tests/ the GPU test binaries, share/qgate/dashboard/ the dashboard
# (qgated --http), and bin/qgate-gpu-check runs the GPU
# tests, the kernel benchmark and the fault builds in one call.
set(QGATE_BUNDLE_DIR ${CMAKE_SOURCE_DIR}/dist/qgate CACHE PATH "Where `bundle` writes the folder")
set(QGATE_BUNDLE_BINARIES $<TARGET_FILE:qgate-worker> $<TARGET_FILE:qgate-prefill> $<TARGET_FILE:qgated> $<TARGET_FILE:qgate>)
set(QGATE_BUNDLE_PLUGINS $<TARGET_FILE:qgate_ref>)
set(QGATE_BUNDLE_TESTS)
set(QGATE_BUNDLE_DEPENDS qgate-worker qgate-prefill qgated qgate qgate_ref)
if(QGATE_HAVE_CUDA)
  list(APPEND QGATE_BUNDLE_BINARIES $<TARGET_FILE:qgate-load>)
  list(APPEND QGATE_BUNDLE_DEPENDS qgate-load)
endif()
if(QGATE_BUILD_TESTS AND QGATE_HAVE_CUDA)
  list(APPEND QGATE_BUNDLE_TESTS $<TARGET_FILE:qgate_cuda_backend_gpu_test> $<TARGET_FILE:qgate_worker_gpu_test>
       $<TARGET_FILE:qgate_worker_leak_gpu_test>)
  list(APPEND QGATE_BUNDLE_DEPENDS qgate_cuda_backend_gpu_test qgate_worker_gpu_test qgate_worker_leak_gpu_test)
endif()
set(QGATE_BUNDLE_FAULTS)
get_property(qgate_fault_targets GLOBAL PROPERTY QGATE_FAULT_BUILDS)
foreach(fault_target ${qgate_fault_targets})
  list(APPEND QGATE_BUNDLE_FAULTS $<TARGET_FILE:${fault_target}>)
  list(APPEND QGATE_BUNDLE_DEPENDS ${fault_target})
endforeach()
# The slow build of kernels/test_builds (a known 3% slowdown of libqgate_ref.so) goes to plugins/, beside it.
get_property(qgate_slow_target GLOBAL PROPERTY QGATE_SLOW_BUILD)
if(qgate_slow_target)
  list(APPEND QGATE_BUNDLE_PLUGINS $<TARGET_FILE:${qgate_slow_target}>)
  list(APPEND QGATE_BUNDLE_DEPENDS ${qgate_slow_target})
endif()
# libqgate_ggml.so, when qgate was configured with QGATE_GGML_SRC (docs/ggml.md).
if(TARGET qgate_ggml)
  list(APPEND QGATE_BUNDLE_PLUGINS $<TARGET_FILE:qgate_ggml>)
  list(APPEND QGATE_BUNDLE_DEPENDS qgate_ggml)
endif()
# The dashboard's page and vendored chart libraries, where qgated looks for them: share/qgate/dashboard.
list(APPEND QGATE_BUNDLE_DEPENDS dashboard_assets)
add_custom_target(bundle
  COMMAND ${CMAKE_COMMAND} -E env
          "QGATE_BUNDLE_BINARIES=${QGATE_BUNDLE_BINARIES}"
          "QGATE_BUNDLE_DASHBOARD=${QGATE_DASHBOARD_DIR}"
          "QGATE_BUNDLE_PLUGINS=${QGATE_BUNDLE_PLUGINS}"
          "QGATE_BUNDLE_FAULTS=${QGATE_BUNDLE_FAULTS}"
          "QGATE_BUNDLE_TESTS=${QGATE_BUNDLE_TESTS}"
          bash ${CMAKE_SOURCE_DIR}/scripts/make-bundle.sh ${QGATE_BUNDLE_DIR} ${CMAKE_SOURCE_DIR}
  DEPENDS ${QGATE_BUNDLE_DEPENDS}
  COMMENT "Bundling into ${QGATE_BUNDLE_DIR}"
  VERBATIM)
