# Man pages for the programs, made at build time from their --help and
# --version by help2man (tools/setup installs it), installed in
# share/man/man1.  Without help2man the build goes on without them (a status
# line says so).  Each page's one-line NAME is given here.  A program that is
# a script, not a target (dps-report), is named by DPS_MAN_SCRIPT_<name>: its
# path, then the files and targets its --help needs built.
find_program(HELP2MAN help2man)
set(DPS_MAN_NAMES
  "dps-collector|collect rows over ZeroMQ and publish differentially private subspace snapshots once per epoch"
  "dps-estimate|estimate a differentially private subspace (or its rank, covariance, regression) from a file of rows"
  "dps-produce|stream the rows of a file to a dps-collector"
  "dps-watch|subscribe to a dps-collector's snapshots and print them"
  "dps-status|ask a running dps-collector for its counters and privacy spent"
  "dps-keygen|make a CURVE key pair for a dps-collector or a producer"
  "dps-gen|write synthetic rows near a low-dimensional subspace (the papers' generator)"
  "dps-mpi-estimate|run the power mechanism on a file of rows sharded by coordinate over MPI ranks"
  "dps-report|draw a PNG of a dps-collector's snapshots (privacy spent, principal angles) from dps-watch --json")
set(DPS_MAN_PAGES "")
if(HELP2MAN AND DPS_SANITIZE)
  # a sanitizer build is for tests: its programs' --help may end in a leak
  # report (MPI's singleton start does), which help2man would take as a failure
  message(STATUS "DPS_SANITIZE: the man pages are not built")
elseif(HELP2MAN)
  file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/man)
  foreach(entry IN LISTS DPS_MAN_NAMES)
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 prog)
    list(GET parts 1 what)
    if(TARGET ${prog})
      set(run $<TARGET_FILE:${prog}>)
      set(needs ${prog})
    elseif(DEFINED DPS_MAN_SCRIPT_${prog})
      list(GET DPS_MAN_SCRIPT_${prog} 0 run)
      set(needs ${DPS_MAN_SCRIPT_${prog}})
    else()
      continue()
    endif()
    set(page ${PROJECT_BINARY_DIR}/man/${prog}.1)
    add_custom_command(OUTPUT ${page}
      COMMAND ${HELP2MAN} --no-info --section 1 --name "${what}" --output ${page} ${run}
      DEPENDS ${needs}
      COMMENT "man page ${prog}.1 (help2man)" VERBATIM)
    list(APPEND DPS_MAN_PAGES ${page})
  endforeach()
  add_custom_target(dps_man_pages ALL DEPENDS ${DPS_MAN_PAGES})
  install(FILES ${DPS_MAN_PAGES} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
else()
  message(STATUS "help2man not found: the man pages are not built (tools/setup installs it)")
endif()
