import { render } from "preact";

function App() {
  return <main>Memory dashboard</main>;
}

render(<App />, document.getElementById("app")!);
