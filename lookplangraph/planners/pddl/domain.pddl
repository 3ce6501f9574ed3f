; The PDDL domain of LookPlanGraph's appendix D, as the paper gives it (only line breaks added).
; Used as is by the LLM+P baseline (lookplangraph/planners/llm_plus_p.py); its limits are listed in README.
(define (domain instruction-following)
  (:requirements :strips :typing)
  (:types room object agent)
  (:predicates (robot-in ?r - room) (object-room ?o - object ?r - room) (agent-hold ?o - object) (hand-empty) (ontop ?o1 - object ?o2 - object) (inside ?o1 - object ?o2 - object) (closed ?o - object) (on-state ?o - object))
  (:action go_to :parameters (?from ?to - room) :precondition (robot-in ?from) :effect (and (robot-in ?to) (not (robot-in ?from))))
  (:action pick_up :parameters (?obj - object ?s - object ?r - room) :precondition (and (robot-in ?r) (object-room ?obj ?r) (object-room ?s ?r) (hand-empty) (or (ontop ?obj ?s) (and (inside ?obj ?s) (not (closed ?s))))) :effect (and (agent-hold ?obj) (not (ontop ?obj ?s)) (not (inside ?obj ?s)) (not (hand-empty))))
  (:action put_on :parameters (?obj - object ?s - object ?r - room) :precondition (and (robot-in ?r) (object-room ?s ?r) (agent-hold ?obj)) :effect (and (ontop ?obj ?s) (object-room ?obj ?r) (not (agent-hold ?obj)) (hand-empty)))
  (:action put_inside :parameters (?obj - object ?c - object ?r - room) :precondition (and (robot-in ?r) (object-room ?c ?r) (agent-hold ?obj) (not (closed ?c))) :effect (and (inside ?obj ?c) (object-room ?obj ?r) (not (agent-hold ?obj)) (hand-empty)))
  (:action turn_on :parameters (?d - object ?r - room) :precondition (and (not (on-state ?d)) (robot-in ?r) (object-room ?d ?r)) :effect (on-state ?d))
  (:action turn_off :parameters (?d - object ?r - room) :precondition (and (on-state ?d) (robot-in ?r) (object-room ?d ?r)) :effect (not (on-state ?d)))
  (:action open :parameters (?c - object ?r - room) :precondition (and (closed ?c) (robot-in ?r) (object-room ?c ?r)) :effect (not (closed ?c)))
  (:action close :parameters (?c - object ?r - room) :precondition (and (not (closed ?c)) (robot-in ?r) (object-room ?c ?r)) :effect (closed ?c)))
